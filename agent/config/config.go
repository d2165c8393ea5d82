// Package config reads the host agent's local configuration file: which
// local clients (by bearer token, or by JWT of the organisation's identity
// provider) act as which principal, tenant class and workflows, and how to
// reach and authenticate to each upstream MCP server (static tokens or
// OAuth client settings).
//
// It never logs or stores tokens: client tokens are kept only as SHA-256
// digests, and upstream credentials are read from files or environment
// variables when a request is made. A stdio upstream's environment is only
// what its entry names (Upstream.ChildEnv), never the agent's own; it may
// run as another user (RunAs, refused when the agent may not switch) and in
// its own directory (Dir). It does not decide anything about policy.
package config

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/internal/yamldoc"
	"github.com/mcpready/mcpready/readiness"
)

// Sentinel errors.
var (
	// ErrInvalid wraps every problem found in a configuration file.
	ErrInvalid = errors.New("invalid agent config")
	// ErrUnauthenticated is returned by Authenticate for a missing or unknown token.
	ErrUnauthenticated = errors.New("unauthenticated")
)

// Identity is what a local client acts as.
type Identity struct {
	// Name labels the client in logs and receipts, e.g. "claude-desktop".
	Name           string `json:"name"`
	PrincipalClass string `json:"principalClass"`
	TenantClass    string `json:"tenantClass,omitempty"`
	// Workflows the client may name. Empty means any workflow.
	Workflows []string `json:"workflows,omitempty"`
	// ReportWorkflows lets the client (an orchestrator) report the end
	// state of the workflows it opened (agent/workflow): the
	// mcpready.workflow.report tool is listed to it and the agent's
	// /workflows/report endpoint accepts its reports. False refuses them
	// (workflow_report_not_permitted).
	ReportWorkflows bool `json:"reportWorkflows,omitempty"`
}

// sameAs reports whether id and o are the same principal in every field
// the agent keys or decides by.
func (id Identity) sameAs(o Identity) bool {
	return id.Name == o.Name && id.PrincipalClass == o.PrincipalClass && id.TenantClass == o.TenantClass &&
		id.ReportWorkflows == o.ReportWorkflows && slices.Equal(id.Workflows, o.Workflows)
}

// oneIdentityPerName refuses two identities with one name that differ:
// sessions, workflows, held calls and per-principal limits are keyed by
// the name, so the two would share them. Entries that agree (a token
// being rotated, two socket mappings of one principal) are one principal.
// An unnamed default principal shares nothing with the named ones.
func oneIdentityPerName(ids []Identity, def *Identity) error {
	if def != nil && def.Name != "" {
		ids = append(slices.Clip(ids), *def)
	}
	first := make(map[string]Identity, len(ids))
	for _, id := range ids {
		prev, ok := first[id.Name]
		if !ok {
			first[id.Name] = id
			continue
		}
		if !prev.sameAs(id) {
			return fmt.Errorf("%w: principal %q is named twice with different classes, workflows or reportWorkflows; one name is one principal (its sessions, workflows and limits are keyed by the name): rename one", ErrInvalid, id.Name)
		}
	}
	return nil
}

// AllowsWorkflow reports whether id may act within workflow w ("" is always allowed).
func (id Identity) AllowsWorkflow(w string) bool {
	if w == "" || len(id.Workflows) == 0 {
		return true
	}
	for _, x := range id.Workflows {
		if x == w || x == "*" {
			return true
		}
	}
	return false
}

// Principal maps one bearer token to an Identity. Exactly one of
// TokenSHA256, TokenFile and TokenEnv names the token.
type Principal struct {
	Identity `json:",inline"`
	// TokenSHA256 is "sha256:<hex>" of the token.
	TokenSHA256 string `json:"tokenSHA256,omitempty"`
	// TokenFile holds the token (surrounding whitespace ignored).
	TokenFile string `json:"tokenFile,omitempty"`
	// TokenEnv names an environment variable holding the token.
	TokenEnv string `json:"tokenEnv,omitempty"`
}

// Upstream says how to reach one upstream server. Exactly one of URL and
// Command is set.
type Upstream struct {
	// Name is the server name used in registry entries and /mcp/servers/<name>.
	Name string `json:"name"`
	// URL is a Streamable HTTP endpoint.
	URL string `json:"url,omitempty"`
	// Command starts a stdio server: program and arguments.
	Command []string `json:"command,omitempty"`
	// Env sets variables of Command's environment to the given values.
	Env map[string]string `json:"env,omitempty"`
	// EnvFrom sets variables of Command's environment from the agent's own:
	// child variable name -> agent variable name (the same variable when
	// both are equal). A variable the agent does not have is an error when
	// the command starts.
	//
	// A command gets only what Env and EnvFrom name, plus PATH and HOME
	// taken from the agent when set (Env or EnvFrom may override them, and
	// an Env value of "" keeps a variable out). It never inherits the rest
	// of the agent's environment: the signing key's password or another
	// upstream's token stay with the agent.
	EnvFrom map[string]string `json:"envFrom,omitempty"`
	// RunAs runs Command as another user and group. The agent must be
	// permitted to switch (root, or CAP_SETUID and CAP_SETGID): otherwise
	// the configuration is refused (ErrRunAs). Nil runs it as the agent.
	RunAs *RunAs `json:"runAs,omitempty"`
	// Dir is Command's working directory (an absolute path to an existing
	// directory); "" is the agent's own.
	Dir string `json:"dir,omitempty"`
	// TokenFile or TokenEnv supply a bearer token sent to URL.
	TokenFile string `json:"tokenFile,omitempty"`
	TokenEnv  string `json:"tokenEnv,omitempty"`
	// Headers are extra HTTP headers sent to URL, not secrets: a credential
	// header (Authorization, Cookie, ...) or one the agent sets itself (the
	// MCP headers, framing, trace context) is refused.
	Headers map[string]string `json:"headers,omitempty"`
	// OAuth obtains tokens for URL as the MCP authorization specification
	// describes (agent/access); nil sends only TokenFile/TokenEnv, if set.
	OAuth *OAuth `json:"oauth,omitempty"`
}

// AuthClass is how the agent authenticates to u (readiness.Auth*): the
// OAuth grant, a static bearer token, a local process, else keyless.
func (u Upstream) AuthClass() string {
	switch {
	case u.OAuth != nil:
		return readiness.AuthOAuth(u.OAuth.Grant)
	case len(u.Command) > 0:
		return readiness.AuthStdio
	case u.TokenFile != "" || u.TokenEnv != "":
		return readiness.AuthBearer
	}
	return readiness.AuthKeyless
}

// RunAs is the numeric user and group a stdio command runs as. The child
// gets no supplementary groups.
type RunAs struct {
	UID *uint32 `json:"uid"`
	GID *uint32 `json:"gid"`
}

// ErrRunAs wraps a runAs the agent cannot honour.
var ErrRunAs = errors.New("runAs not permitted")

// OAuth grant types (OAuth.Grant), named in the auth class of the calls
// made with them (readiness.AuthOAuth).
const (
	// GrantClientCredentials: the agent acts as a service principal.
	GrantClientCredentials = readiness.GrantClientCredentials
	// GrantTokenExchange: the local principal's own token (from the
	// organisation's identity provider) is exchanged (RFC 8693) for an
	// upstream token on its behalf.
	GrantTokenExchange = readiness.GrantTokenExchange
	// GrantAuthorizationCode: the user completes the authorization-code
	// flow with PKCE (OAuth 2.1) at the upstream's authorization server in
	// a browser, once per principal; the agent keeps the tokens (and the
	// refresh token) in memory.
	GrantAuthorizationCode = readiness.GrantAuthorizationCode
)

// Token endpoint client authentication methods (OAuth.TokenEndpointAuth).
const (
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
	AuthNone              = "none"
	// AuthPrivateKeyJWT: a JWT signed with PrivateKeyFile's key (RFC 7523).
	AuthPrivateKeyJWT = "private_key_jwt"
)

// Token verification modes (OAuth.TokenVerification).
const (
	// VerifyJWT: the access token must be a JWT signed by the issuer's
	// JWKS, carrying its issuer, audience, scopes and expiry.
	VerifyJWT = "jwt"
	// VerifyUnverified: the token is presented as the authorization server
	// issued it, unverified (an opaque token); its facts are those of the
	// token response and receipts record verification "unverified".
	VerifyUnverified = "unverified"
)

// OAuth is one upstream's OAuth client settings. The client secret comes
// from a file or an environment variable only, read when a token is
// requested.
type OAuth struct {
	// Grant is GrantClientCredentials, GrantTokenExchange,
	// GrantAuthorizationCode, GrantJWTBearer or GrantIDJAG. Required.
	Grant string `json:"grant"`
	// ClientID is the pre-registered client's id. Required, except for
	// authorization_code with ClientIDMetadataURL or DynamicRegistration.
	ClientID string `json:"clientID,omitempty"`
	// ClientSecretFile or ClientSecretEnv hold the client secret; exactly
	// one for client_secret_basic and client_secret_post, neither for none
	// and private_key_jwt.
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	ClientSecretEnv  string `json:"clientSecretEnv,omitempty"`
	// TokenEndpointAuth is how the client authenticates at the token
	// endpoint; "" means client_secret_basic (for a dynamically registered
	// client: what the registration answered).
	TokenEndpointAuth string `json:"tokenEndpointAuth,omitempty"`
	// PrivateKeyFile is the PEM private key (PKCS #8, EC or RSA) that signs
	// private_key_jwt client assertions; required for it, refused otherwise.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// RedirectURL is where the authorization server sends the user back
	// (authorization_code only, required there): an http URL on a loopback
	// address with a port, served by the agent while a flow is pending.
	RedirectURL string `json:"redirectURL,omitempty"`
	// ClientIDMetadataURL is the agent's client ID metadata document (an
	// https URL with a path), used as the client id where the authorization
	// server supports client ID metadata documents (authorization_code).
	ClientIDMetadataURL string `json:"clientIDMetadataURL,omitempty"`
	// DynamicRegistration registers a client (RFC 7591) at an authorization
	// server that offers it when neither the metadata document nor ClientID
	// applies (authorization_code).
	DynamicRegistration bool `json:"dynamicRegistration,omitempty"`
	// TokenVerification is VerifyJWT ("" is jwt) or VerifyUnverified.
	TokenVerification string `json:"tokenVerification,omitempty"`
	// Scopes to ask for. Empty: the 401 challenge's scope, else the
	// protected resource's scopes_supported.
	Scopes []string `json:"scopes,omitempty"`
	// Issuer, when set, is the only authorization server accepted: the
	// protected resource must name it and tokens must carry it.
	Issuer string `json:"issuer,omitempty"`
	// MaxStepUps bounds re-authorizations after insufficient_scope in one
	// challenge sequence of a principal at this upstream (until a request
	// succeeds again); zero means 2.
	MaxStepUps int `json:"maxStepUps,omitempty"`
	// TenantClaim names the claim of this upstream's tokens that carries
	// their tenant (e.g. "tid", "tenant"); the per-call check compares it
	// with the tenant the Policy and the entry require. Empty reads no
	// tenant: a token of this upstream then fails a tenant requirement.
	TenantClaim string `json:"tenantClaim,omitempty"`
	// Introspection, when set, checks this upstream's opaque (non-JWT)
	// access tokens by RFC 7662 token introspection, authenticated as the
	// client above. Nil: an opaque token is refused.
	Introspection *Introspection `json:"introspection,omitempty"`
	// AssertionFile or AssertionEnv hold GrantJWTBearer's JWT (oauthext.go).
	AssertionFile string `json:"assertionFile,omitempty"`
	AssertionEnv  string `json:"assertionEnv,omitempty"`
	// EnterpriseIdP is GrantIDJAG's enterprise identity provider.
	EnterpriseIdP *EnterpriseIdP `json:"enterpriseIdP,omitempty"`
	// DPoP, when set, sender-constrains this upstream's tokens (RFC 9449).
	DPoP *DPoP `json:"dpop,omitempty"`
}

// Introspection configures RFC 7662 token introspection for one upstream.
type Introspection struct {
	// Endpoint is the introspection endpoint (https, or http on loopback);
	// "" means the authorization server metadata's introspection_endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// CacheSeconds: a result is reused for at most this long, and never
	// past the token's expiry; zero means 60.
	CacheSeconds int `json:"cacheSeconds,omitempty"`
}

// ClientSecret reads the OAuth client secret, "" for TokenEndpointAuth none.
func (o OAuth) ClientSecret() (string, error) {
	return readSecret(o.ClientSecretFile, o.ClientSecretEnv)
}

// readSecret reads a secret from file or, else, the environment variable
// env; "" when neither is set. Errors never contain the secret.
func readSecret(file, env string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("secret file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", env)
		}
		return strings.TrimSpace(v), nil
	}
	return "", nil
}

func (o OAuth) validate() error {
	code := o.Grant == GrantAuthorizationCode
	if !slices.Contains(readiness.Grants, o.Grant) {
		return fmt.Errorf("oauth.grant %q: want one of %s", o.Grant, strings.Join(readiness.Grants, ", "))
	}
	if err := o.validateExt(); err != nil {
		return err
	}
	if err := o.validateCode(); err != nil {
		return err
	}
	if o.ClientSecretFile != "" && o.ClientSecretEnv != "" {
		return errors.New("oauth: set at most one of clientSecretFile and clientSecretEnv")
	}
	hasSecret := o.ClientSecretFile != "" || o.ClientSecretEnv != ""
	if o.PrivateKeyFile != "" && o.TokenEndpointAuth != AuthPrivateKeyJWT {
		return errors.New("oauth: privateKeyFile is only for tokenEndpointAuth private_key_jwt")
	}
	switch o.TokenEndpointAuth {
	case "", AuthClientSecretBasic, AuthClientSecretPost:
		// A code-flow client without ClientID registers (or uses its
		// metadata document) and gets its secret, if any, from that.
		if !hasSecret && (!code || o.ClientID != "") {
			return errors.New("oauth: a client secret (clientSecretFile or clientSecretEnv) is required")
		}
	case AuthNone, AuthPrivateKeyJWT:
		if hasSecret {
			return fmt.Errorf("oauth: tokenEndpointAuth %s takes no client secret", o.TokenEndpointAuth)
		}
		if o.TokenEndpointAuth == AuthNone && o.Grant == GrantClientCredentials {
			return errors.New("oauth: client_credentials needs a confidential client, not tokenEndpointAuth none")
		}
		if o.TokenEndpointAuth == AuthPrivateKeyJWT && o.PrivateKeyFile == "" {
			return errors.New("oauth: tokenEndpointAuth private_key_jwt needs privateKeyFile")
		}
	default:
		return fmt.Errorf("oauth.tokenEndpointAuth %q: want %s, %s, %s or %s", o.TokenEndpointAuth, AuthClientSecretBasic, AuthClientSecretPost, AuthPrivateKeyJWT, AuthNone)
	}
	if o.TokenVerification != "" && o.TokenVerification != VerifyJWT && o.TokenVerification != VerifyUnverified {
		return fmt.Errorf("oauth.tokenVerification %q: want %s or %s", o.TokenVerification, VerifyJWT, VerifyUnverified)
	}
	if o.MaxStepUps < 0 {
		return errors.New("oauth.maxStepUps must not be negative")
	}
	if in := o.Introspection; in != nil {
		switch {
		case o.TokenVerification == VerifyUnverified:
			return errors.New("oauth: introspection checks opaque tokens; it cannot be combined with tokenVerification unverified")
		case o.TokenEndpointAuth == AuthNone:
			return errors.New("oauth.introspection authenticates as the client: it needs a client secret, not tokenEndpointAuth none")
		case in.CacheSeconds < 0:
			return errors.New("oauth.introspection.cacheSeconds must not be negative")
		case in.Endpoint != "" && !secureURL(in.Endpoint):
			return fmt.Errorf("oauth.introspection.endpoint %q: want an https URL (the token is sent there; plain http on loopback only)", in.Endpoint)
		}
	}
	return nil
}

// validateCode checks the authorization-code settings: a loopback
// redirect URL and a way to have a client id, none of them for the other
// grants.
func (o OAuth) validateCode() error {
	if o.Grant != GrantAuthorizationCode {
		switch {
		case o.ClientID == "":
			return errors.New("oauth.clientID is required")
		case o.RedirectURL != "" || o.ClientIDMetadataURL != "" || o.DynamicRegistration:
			return errors.New("oauth: redirectURL, clientIDMetadataURL and dynamicRegistration are for grant authorization_code")
		}
		return nil
	}
	if o.ClientID == "" && o.ClientIDMetadataURL == "" && !o.DynamicRegistration {
		return errors.New("oauth: authorization_code needs clientID, clientIDMetadataURL or dynamicRegistration")
	}
	if o.ClientIDMetadataURL != "" {
		u, err := url.Parse(o.ClientIDMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			return errors.New("oauth.clientIDMetadataURL must be an https URL with a path")
		}
	}
	u, err := url.Parse(o.RedirectURL)
	if err != nil || u.Scheme != "http" || u.Port() == "" || !loopback.Host(u.Hostname()) || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("oauth.redirectURL must be an http URL on a loopback address with a port (e.g. http://127.0.0.1:8765/callback), without query")
	}
	return nil
}

// PrivateKey reads the PEM private key of private_key_jwt.
func (o OAuth) PrivateKey() ([]byte, error) {
	b, err := os.ReadFile(o.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("private key file: %w", err)
	}
	return b, nil
}

// Token reads the upstream's bearer token, "" when none is configured.
func (u Upstream) Token() (string, error) {
	t, err := readSecret(u.TokenFile, u.TokenEnv)
	if err != nil {
		return "", fmt.Errorf("upstream %s: token: %w", u.Name, err)
	}
	return t, nil
}

// ErrEnv wraps a variable ChildEnv cannot supply.
var ErrEnv = errors.New("stdio environment")

// inheritedEnv are the agent's variables every command gets (see EnvFrom).
var inheritedEnv = []string{"PATH", "HOME"}

// ChildEnv is the whole environment of Command ("NAME=value" entries,
// sorted): PATH and HOME from the agent when set, then EnvFrom, then Env;
// a name set to "" is left out. It never returns a value in an error.
func (u Upstream) ChildEnv() ([]string, error) {
	m := map[string]string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, from := range u.EnvFrom {
		v, ok := os.LookupEnv(from)
		if !ok {
			return nil, fmt.Errorf("%w: upstream %s: environment variable %s is not set", ErrEnv, u.Name, from)
		}
		m[k] = v
	}
	for k, v := range u.Env {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	slices.Sort(env)
	return env, nil
}

// validEnvName: non-empty, no '=' and no NUL.
func validEnvName(k string) bool { return k != "" && !strings.ContainsAny(k, "=\x00") }

// File is the agent configuration file.
type File struct {
	// Principals are the local clients, by token.
	Principals []Principal `json:"principals,omitempty"`
	// DefaultPrincipal is used for requests without a token. Nil refuses them (HTTP 401).
	DefaultPrincipal *Identity `json:"defaultPrincipal,omitempty"`
	// Upstreams override or complete the endpoints named by registry entries.
	Upstreams []Upstream `json:"upstreams,omitempty"`
	// Receipts says what happens to calls when the receipt spool cannot
	// accept receipts. Nil is the zero Receipts.
	Receipts *Receipts `json:"receipts,omitempty"`
	// IdentityProvider authenticates local clients by JWTs of the
	// organisation's identity provider (agent/access); nil accepts none.
	IdentityProvider *IdentityProvider `json:"identityProvider,omitempty"`
	// TrustedOrigins are the web origins ("scheme://host[:port]") of
	// browser-based clients allowed to call the front. A request another
	// origin's page sends (its Origin or Sec-Fetch-Site says so) is
	// refused with HTTP 403, as is one whose Host is not a loopback name on
	// a loopback listener (DNS rebinding). Clients outside a browser send
	// neither header and are not affected.
	TrustedOrigins []string `json:"trustedOrigins,omitempty"`
	// SocketPrincipals map local processes on the agent's Unix-domain
	// socket (agent/peercred), by their peer credentials, to principals.
	SocketPrincipals []SocketPrincipal `json:"socketPrincipals,omitempty"`
	// Limits bound what local clients may hold open and how long the
	// agent waits for them; the zero Limits is every default.
	Limits Limits `json:"limits,omitempty"`
}

// Receipts configures how calls depend on their receipts. State-changing
// calls always wait for their receipt to be durable and are refused when
// the spool cannot accept receipts (full, or broken after a failed
// fsync); this is not configurable.
type Receipts struct {
	// ReadOnlyWhenUnavailable is what read-only calls do when the spool
	// cannot accept receipts: "continue" (the default, also for ""):
	// they run and their receipts are dropped and counted; "refuse": they
	// are refused like state-changing calls.
	ReadOnlyWhenUnavailable string `json:"readOnlyWhenUnavailable,omitempty"`
}

// ContinueReadOnly reports whether read-only calls run while the spool
// cannot accept receipts (Receipts.ReadOnlyWhenUnavailable).
func (c *Config) ContinueReadOnly() bool {
	r := c.file.Receipts
	return r == nil || r.ReadOnlyWhenUnavailable != "refuse"
}

// SocketPrincipal maps the processes of one user or group connecting over
// the agent's Unix-domain socket to an Identity: exactly one of UID and GID
// is set. A uid match wins over a gid match.
type SocketPrincipal struct {
	Identity `json:",inline"`
	UID      *uint32 `json:"uid,omitempty"`
	GID      *uint32 `json:"gid,omitempty"`
}

// IdentityProviderPrefix starts the name of every identity authenticated
// by the identity provider ("idp:<sub>").
const IdentityProviderPrefix = "idp:"

// IdentityProvider is the organisation's identity provider whose JWTs
// local clients may present instead of a configured bearer token.
type IdentityProvider struct {
	// Issuer the tokens must carry (iss). Required.
	Issuer string `json:"issuer"`
	// Audience the tokens must be for (aud), e.g. "mcpready-agent". Required.
	Audience string `json:"audience"`
	// JWKSURL publishes the issuer's signing keys. Required.
	JWKSURL string `json:"jwksURL"`
	// Claims name the claims mapped to the Identity; zero values are the
	// defaults documented per field.
	Claims IdentityClaims `json:"claims,omitempty"`
	// PrincipalClasses a token may claim; empty permits any.
	PrincipalClasses []string `json:"principalClasses,omitempty"`
	// WorkflowReporters are the principal classes whose tokens may report
	// workflows (as Identity.ReportWorkflows does for a configured
	// principal); empty: no identity-provider principal may. Each must be
	// one of PrincipalClasses when those are listed.
	WorkflowReporters []string `json:"workflowReporters,omitempty"`
}

// ReportsWorkflows reports whether a token of principal class class may
// report workflows (WorkflowReporters).
func (idp *IdentityProvider) ReportsWorkflows(class string) bool {
	return idp != nil && class != "" && slices.Contains(idp.WorkflowReporters, class)
}

// IdentityClaims names the JWT claims of an Identity.
type IdentityClaims struct {
	// PrincipalClass claim (a string, required in every token); "" means "principal_class".
	PrincipalClass string `json:"principalClass,omitempty"`
	// TenantClass claim (a string, optional); "" means "tenant_class".
	TenantClass string `json:"tenantClass,omitempty"`
	// Workflows claim (a list of strings or a space-separated string,
	// optional; absent means any workflow); "" means "workflows".
	Workflows string `json:"workflows,omitempty"`
}

// Config is a loaded, validated File. It is immutable and safe for concurrent use.
type Config struct {
	file   File
	tokens [][32]byte // digests of the tokens of ids
	ids    []Identity // file.Principals, then file.SocketPrincipals
	// peer holds the in-memory token of each socket principal (parallel
	// to file.SocketPrincipals): agent/peercred presents it for a peer.
	peer []string
}

// Load reads and validates a configuration file (YAML or JSON; unknown
// fields are errors). An empty path yields the empty configuration.
func Load(path string) (*Config, error) {
	if path == "" {
		return Parse(nil)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Parse(b)
}

// Parse validates configuration data. Nil or empty data is the empty configuration.
func Parse(data []byte) (*Config, error) {
	f, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return New(f)
}

// Decode reads configuration data (YAML or JSON) into a File without
// validating it or reading the files it names: unknown fields, repeated
// keys and values of the wrong type are errors (ErrInvalid). New validates
// the result.
func Decode(data []byte) (File, error) {
	var f File
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil
	}
	if err := decodeStrict(data, &f); err != nil {
		return File{}, err
	}
	return f, nil
}

// decodeStrict decodes YAML or JSON data into v: unknown fields, repeated
// keys and values of the wrong type are errors (ErrInvalid).
func decodeStrict(data []byte, v any) error {
	j, err := yamldoc.JSON(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// ParseOAuth reads one upstream's oauth block (YAML or JSON, as it appears
// under an upstream of a configuration file) and validates it as New does;
// errors are ErrInvalid. It does not read the files the block names.
func ParseOAuth(data []byte) (OAuth, error) {
	var o OAuth
	if len(bytes.TrimSpace(data)) == 0 {
		return OAuth{}, fmt.Errorf("%w: no oauth settings", ErrInvalid)
	}
	if err := decodeStrict(data, &o); err != nil {
		return OAuth{}, err
	}
	if err := o.validate(); err != nil {
		return OAuth{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return o, nil
}

// New validates f and resolves its principal tokens.
func New(f File) (*Config, error) {
	c := &Config{file: f}
	seen := map[[32]byte]bool{}
	for i, p := range f.Principals {
		if p.Name == "" || p.PrincipalClass == "" {
			return nil, fmt.Errorf("%w: principals[%d]: name and principalClass are required", ErrInvalid, i)
		}
		if strings.HasPrefix(p.Name, IdentityProviderPrefix) {
			return nil, fmt.Errorf("%w: principal %s: names starting %q are the identity provider's", ErrInvalid, p.Name, IdentityProviderPrefix)
		}
		sum, err := p.tokenDigest()
		if err != nil {
			return nil, fmt.Errorf("%w: principal %s: %w", ErrInvalid, p.Name, err)
		}
		if seen[sum] {
			return nil, fmt.Errorf("%w: principal %s: token shared with another principal", ErrInvalid, p.Name)
		}
		seen[sum] = true
		c.tokens = append(c.tokens, sum)
		c.ids = append(c.ids, p.Identity)
	}
	for i, sp := range f.SocketPrincipals {
		if sp.Name == "" || sp.PrincipalClass == "" || (sp.UID == nil) == (sp.GID == nil) {
			return nil, fmt.Errorf("%w: socketPrincipals[%d]: name, principalClass and exactly one of uid and gid are required", ErrInvalid, i)
		}
		if strings.HasPrefix(sp.Name, IdentityProviderPrefix) {
			return nil, fmt.Errorf("%w: socket principal %s: names starting %q are the identity provider's", ErrInvalid, sp.Name, IdentityProviderPrefix)
		}
		tok := rand.Text() // never leaves the process
		c.peer = append(c.peer, tok)
		c.tokens = append(c.tokens, sha256.Sum256([]byte(tok)))
		c.ids = append(c.ids, sp.Identity)
	}
	if d := f.DefaultPrincipal; d != nil && d.PrincipalClass == "" {
		return nil, fmt.Errorf("%w: defaultPrincipal: principalClass is required", ErrInvalid)
	}
	if err := oneIdentityPerName(c.ids, f.DefaultPrincipal); err != nil {
		return nil, err
	}
	if r := f.Receipts; r != nil {
		switch r.ReadOnlyWhenUnavailable {
		case "", "continue", "refuse":
		default:
			return nil, fmt.Errorf(`%w: receipts.readOnlyWhenUnavailable %q: want "continue" or "refuse"`, ErrInvalid, r.ReadOnlyWhenUnavailable)
		}
	}
	if idp := f.IdentityProvider; idp != nil {
		if idp.Issuer == "" || idp.Audience == "" || idp.JWKSURL == "" {
			return nil, fmt.Errorf("%w: identityProvider: issuer, audience and jwksURL are required", ErrInvalid)
		}
		if !secureURL(idp.JWKSURL) {
			return nil, fmt.Errorf("%w: identityProvider: jwksURL must be https (or http on loopback)", ErrInvalid)
		}
		for _, r := range idp.WorkflowReporters {
			if r == "" || len(idp.PrincipalClasses) > 0 && !slices.Contains(idp.PrincipalClasses, r) {
				return nil, fmt.Errorf("%w: identityProvider.workflowReporters %q: not a principal class a token may claim (principalClasses)", ErrInvalid, r)
			}
		}
	}
	if _, err := OriginProtection(f.TrustedOrigins); err != nil {
		return nil, err
	}
	if err := f.Limits.validate(); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i, u := range f.Upstreams {
		if u.Name == "" || strings.ContainsAny(u.Name, "/ ") {
			return nil, fmt.Errorf("%w: upstreams[%d]: name %q must be non-empty without '/' or spaces", ErrInvalid, i, u.Name)
		}
		if names[u.Name] {
			return nil, fmt.Errorf("%w: upstream %s listed twice", ErrInvalid, u.Name)
		}
		names[u.Name] = true
		if (u.URL == "") == (len(u.Command) == 0) {
			return nil, fmt.Errorf("%w: upstream %s: set exactly one of url and command", ErrInvalid, u.Name)
		}
		if (len(u.Env) > 0 || len(u.EnvFrom) > 0) && len(u.Command) == 0 {
			return nil, fmt.Errorf("%w: upstream %s: env and envFrom apply to a command only", ErrInvalid, u.Name)
		}
		for k, from := range u.EnvFrom {
			if !validEnvName(k) || !validEnvName(from) {
				return nil, fmt.Errorf("%w: upstream %s: envFrom %q: %q: invalid variable name", ErrInvalid, u.Name, k, from)
			}
		}
		for k := range u.Env {
			if !validEnvName(k) {
				return nil, fmt.Errorf("%w: upstream %s: env %q: invalid variable name", ErrInvalid, u.Name, k)
			}
		}
		if (u.RunAs != nil || u.Dir != "") && len(u.Command) == 0 {
			return nil, fmt.Errorf("%w: upstream %s: runAs and dir apply to a command only", ErrInvalid, u.Name)
		}
		if err := u.checkRunAs(); err != nil {
			return nil, fmt.Errorf("%w: upstream %s: %w", ErrInvalid, u.Name, err)
		}
		if u.Dir != "" {
			if fi, err := os.Stat(u.Dir); !filepath.IsAbs(u.Dir) || err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("%w: upstream %s: dir %q must be an absolute path to an existing directory", ErrInvalid, u.Name, u.Dir)
			}
		}
		if u.TokenFile != "" && u.TokenEnv != "" {
			return nil, fmt.Errorf("%w: upstream %s: set at most one of tokenFile and tokenEnv", ErrInvalid, u.Name)
		}
		if (u.TokenFile != "" || u.TokenEnv != "" || len(u.Headers) > 0) && u.URL == "" {
			return nil, fmt.Errorf("%w: upstream %s: tokenFile, tokenEnv and headers apply to a url only (a command gets its credentials through env or envFrom)", ErrInvalid, u.Name)
		}
		if pu, err := url.Parse(u.URL); (u.TokenFile != "" || u.TokenEnv != "" || u.OAuth != nil) && (err != nil || !loopback.Confidential(pu)) {
			return nil, fmt.Errorf("%w: upstream %s: its url must be https: a credential is sent to it (plain http on a loopback address only)", ErrInvalid, u.Name)
		}
		for k, v := range u.Headers {
			if err := checkHeader(k, v); err != nil {
				return nil, fmt.Errorf("%w: upstream %s: header %q: %w", ErrInvalid, u.Name, k, err)
			}
		}
		if o := u.OAuth; o != nil {
			if u.URL == "" || u.TokenFile != "" || u.TokenEnv != "" {
				return nil, fmt.Errorf("%w: upstream %s: oauth needs url and no tokenFile or tokenEnv", ErrInvalid, u.Name)
			}
			if err := o.validate(); err != nil {
				return nil, fmt.Errorf("%w: upstream %s: %w", ErrInvalid, u.Name, err)
			}
		}
	}
	return c, nil
}

// Request headers an upstream's configured headers must not set
// (canonical form): credentials, which the file would hold in clear, and
// the headers the agent and its HTTP client set themselves (besides every
// Mcp- header, the protocol's).
var (
	credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}
	agentHeaders      = []string{"Host", "Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Te", "Trailer",
		"Upgrade", "Accept", "Last-Event-Id", "Traceparent", "Tracestate", "Baggage"}
)

// checkHeader refuses a configured upstream header the agent must own, or
// one HTTP cannot carry.
func checkHeader(name, value string) error {
	c := http.CanonicalHeaderKey(name)
	switch {
	case !httpguts.ValidHeaderFieldName(name):
		return errors.New("not a valid header name")
	case !httpguts.ValidHeaderFieldValue(value):
		return errors.New("the value holds a control character")
	case slices.Contains(credentialHeaders, c):
		return errors.New("a credential may not be configured in clear: use tokenFile, tokenEnv or oauth")
	case slices.Contains(agentHeaders, c) || strings.HasPrefix(c, "Mcp-"):
		return errors.New("may not be configured: the agent sets it")
	}
	return nil
}

func (p Principal) tokenDigest() ([32]byte, error) {
	var sum [32]byte
	n := 0
	for _, s := range []string{p.TokenSHA256, p.TokenFile, p.TokenEnv} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return sum, errors.New("set exactly one of tokenSHA256, tokenFile and tokenEnv")
	}
	switch {
	case p.TokenSHA256 != "":
		h, ok := strings.CutPrefix(p.TokenSHA256, "sha256:")
		b, err := hex.DecodeString(h)
		if !ok || err != nil || len(b) != 32 {
			return sum, errors.New(`tokenSHA256 must be "sha256:" and 64 hex digits`)
		}
		copy(sum[:], b)
		return sum, nil
	case p.TokenFile != "":
		b, err := os.ReadFile(p.TokenFile)
		if err != nil {
			return sum, fmt.Errorf("token file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return sum, errors.New("token file is empty")
		}
		return sha256.Sum256([]byte(t)), nil
	default:
		t := strings.TrimSpace(os.Getenv(p.TokenEnv))
		if t == "" {
			return sum, fmt.Errorf("environment variable %s is empty or unset", p.TokenEnv)
		}
		return sha256.Sum256([]byte(t)), nil
	}
}

// TokenDigest returns the "sha256:<hex>" form of token for TokenSHA256.
func TokenDigest(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

// Authenticate maps a bearer token ("" when the request had none) to an
// Identity. The comparison is constant-time over every configured token.
func (c *Config) Authenticate(token string) (Identity, error) {
	if token == "" {
		if c.file.DefaultPrincipal != nil {
			return *c.file.DefaultPrincipal, nil
		}
		return Identity{}, fmt.Errorf("%w: no bearer token and no default principal", ErrUnauthenticated)
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range c.tokens {
		if subtle.ConstantTimeCompare(sum[:], c.tokens[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, fmt.Errorf("%w: unknown bearer token", ErrUnauthenticated)
	}
	return c.ids[found], nil
}

// PeerToken is the in-memory token of the socket principal a peer with
// uid and gid maps to (a uid match first), false when none does. Only
// agent/peercred presents it, on behalf of a peer it has identified.
func (c *Config) PeerToken(uid, gid uint32) (string, bool) {
	for _, byUID := range []bool{true, false} {
		for i, sp := range c.file.SocketPrincipals {
			if byUID && sp.UID != nil && *sp.UID == uid || !byUID && sp.GID != nil && *sp.GID == gid {
				return c.peer[i], true
			}
		}
	}
	return "", false
}

// Upstream returns the configured upstream named name.
func (c *Config) Upstream(name string) (Upstream, bool) {
	for _, u := range c.file.Upstreams {
		if u.Name == name {
			return u, true
		}
	}
	return Upstream{}, false
}

// OriginProtection is net/http's cross-origin protection trusting
// origins (File.TrustedOrigins); a malformed origin is ErrInvalid.
func OriginProtection(origins []string) (*http.CrossOriginProtection, error) {
	p := http.NewCrossOriginProtection()
	for _, o := range origins {
		if err := p.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: trustedOrigins %q: want scheme://host[:port]", ErrInvalid, o)
		}
	}
	return p, nil
}

// TrustedOrigins returns File.TrustedOrigins.
func (c *Config) TrustedOrigins() []string { return slices.Clone(c.file.TrustedOrigins) }

// IdentityProvider returns the configured identity provider, nil if none.
func (c *Config) IdentityProvider() *IdentityProvider { return c.file.IdentityProvider }

// Upstreams returns every configured upstream.
func (c *Config) Upstreams() []Upstream { return append([]Upstream(nil), c.file.Upstreams...) }
