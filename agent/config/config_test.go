package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/readiness"
)

func TestParseAndAuthenticate(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte("secret-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPREADY_TEST_TOKEN", "secret-c")
	data := []byte(`
principals:
  - name: a
    principalClass: engineer
    tenantClass: internal
    workflows: [wf-1]
    tokenSHA256: ` + TokenDigest("secret-a") + `
  - name: b
    principalClass: support
    tokenFile: ` + tokFile + `
  - name: c
    principalClass: bot
    tokenEnv: MCPREADY_TEST_TOKEN
defaultPrincipal:
  name: anonymous
  principalClass: default
upstreams:
  - name: docs
    url: http://127.0.0.1:9/mcp
    tokenEnv: DOCS_TOKEN
  - name: fs
    command: [/bin/true]
`)
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token, class string
		err          error
	}{
		{"secret-a", "engineer", nil},
		{"secret-b", "support", nil},
		{"secret-c", "bot", nil},
		{"", "default", nil},
		{"wrong", "", ErrUnauthenticated},
	}
	for _, tt := range tests {
		id, err := c.Authenticate(tt.token)
		if !errors.Is(err, tt.err) || id.PrincipalClass != tt.class {
			t.Errorf("token %q: got %+v, %v", tt.token, id, err)
		}
	}
	id, _ := c.Authenticate("secret-a")
	if !id.AllowsWorkflow("wf-1") || id.AllowsWorkflow("wf-2") || !id.AllowsWorkflow("") {
		t.Error("workflow allow-list not applied")
	}
	if u, ok := c.Upstream("docs"); !ok || u.URL == "" {
		t.Error("upstream docs missing")
	}
}

func TestParseRejects(t *testing.T) {
	bad := []string{
		"principals: [{name: a, principalClass: x}]",                       // no token
		"principals: [{name: a, principalClass: x, tokenSHA256: md5:00}]",  // bad digest
		"upstreams: [{name: a}]",                                           // no url/command
		"upstreams: [{name: a, url: u, command: [x]}]",                     // both
		"upstreams: [{name: a/b, url: u}]",                                 // bad name
		"upstreams: [{name: a, url: u}, {name: a, url: v}]",                // duplicate
		"unknownField: 1",                                                  // strict
		"defaultPrincipal: {name: x}",                                      // no class
		"upstreams: [{name: a, url: u, env: {A: b}}]",                      // env for a URL
		"upstreams: [{name: a, command: [x], env: {A=B: c}}]",              // bad name
		"upstreams: [{name: a, command: [x], envFrom: {A: ''}}]",           // bad source
		"receipts: {readOnlyWhenUnavailable: maybe}",                       // unknown mode
		"upstreams: [{name: a, url: u, runAs: {uid: 1, gid: 1}}]",          // runAs for a URL
		"upstreams: [{name: a, url: u, dir: /tmp}]",                        // dir for a URL
		"upstreams: [{name: a, command: [x], runAs: {uid: 1}}]",            // no gid
		"upstreams: [{name: a, command: [x], dir: tmp}]",                   // relative dir
		"upstreams: [{name: a, command: [x], dir: /nonexistent/mcpready}]", // missing dir
	}
	for _, b := range bad {
		if _, err := Parse([]byte(b)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v", b, err)
		}
	}
	c, _ := Parse(nil)
	if _, err := c.Authenticate(""); !errors.Is(err, ErrUnauthenticated) {
		t.Error("empty config must refuse requests without a token")
	}
}

func TestReceiptsReadOnlyWhenUnavailable(t *testing.T) {
	for in, want := range map[string]bool{"": true, "receipts: {}": true, "receipts: {readOnlyWhenUnavailable: continue}": true,
		"receipts: {readOnlyWhenUnavailable: refuse}": false} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ContinueReadOnly(); got != want {
			t.Errorf("%q: ContinueReadOnly %v, want %v", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("principals: [{name: a, principalClass: x, tokenSHA256: sha256:00}]"))
	f.Add([]byte("upstreams: [{name: a, url: http://x}]"))
	f.Add([]byte("receipts: {readOnlyWhenUnavailable: refuse}"))
	f.Add([]byte("upstreams: [{name: a, command: [x], runAs: {uid: 65534, gid: 65534}, dir: /}]"))
	f.Add([]byte("limits: {upstreamSessions: 1, readHeaderTimeout: 1s, coldAfter: 10ms, workflows: {open: 2, idleTimeout: 1h}}"))
	f.Add([]byte("upstreams: [{name: a, url: http://x, headers: {X-Team: a, mcp-session-id: b}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil {
			_, _ = c.Authenticate("x")
			for _, u := range c.Upstreams() {
				if !readiness.IsAuthClass(u.AuthClass()) {
					t.Fatalf("upstream %s: auth class %q", u.Name, u.AuthClass())
				}
				for k, v := range u.Headers {
					if checkHeader(k, v) != nil {
						t.Fatalf("upstream %s: header %q accepted", u.Name, k)
					}
				}
			}
		}
	})
}

func TestChildEnv(t *testing.T) {
	t.Setenv("MCPREADY_TEST_SECRET", "s")
	t.Setenv("MCPREADY_TEST_FROM", "f")
	c, err := Parse([]byte(`
upstreams:
  - name: fs
    command: [/bin/true]
    env: {A: "1", HOME: ""}
    envFrom: {B: MCPREADY_TEST_FROM}
`))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := c.Upstream("fs")
	env, err := u.ChildEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "B=f"}
	if p, ok := os.LookupEnv("PATH"); ok {
		want = append(want, "PATH="+p)
	}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q want %q", env, want)
	}
	u.EnvFrom = map[string]string{"B": "MCPREADY_TEST_UNSET"}
	if _, err := u.ChildEnv(); !errors.Is(err, ErrEnv) {
		t.Fatalf("unset source: %v", err)
	}
}

func TestOAuthValidation(t *testing.T) {
	t.Setenv("OAUTH_TEST_SECRET", "  s3cret \n")
	ok := `upstreams:
- name: a
  url: https://a.example/mcp
  oauth: {grant: client_credentials, clientID: agent, clientSecretEnv: OAUTH_TEST_SECRET, tokenEndpointAuth: client_secret_post, scopes: [read]}
- name: b
  url: https://b.example/mcp
  oauth: {grant: token_exchange, clientID: agent, tokenEndpointAuth: none}
- name: c
  url: https://c.example/mcp
  oauth: {grant: authorization_code, redirectURL: "http://127.0.0.1:8765/cb", clientIDMetadataURL: "https://agent.example/client.json", dynamicRegistration: true, tokenVerification: unverified}
- name: d
  url: https://d.example/mcp
  oauth: {grant: client_credentials, clientID: svc, tokenEndpointAuth: private_key_jwt, privateKeyFile: /etc/key.pem}
- name: e
  url: https://e.example/mcp
  oauth: {grant: authorization_code, clientID: app, tokenEndpointAuth: none, redirectURL: "http://localhost:9/cb"}
`
	c, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Upstream("a")
	if s, err := a.OAuth.ClientSecret(); err != nil || s != "s3cret" {
		t.Fatalf("secret = %q, %v", s, err)
	}
	bad := map[string]string{
		"unknown grant":                              `{grant: password, clientID: x, clientSecretEnv: E}`,
		"no client id":                               `{grant: client_credentials, clientSecretEnv: E}`,
		"no secret":                                  `{grant: client_credentials, clientID: x}`,
		"two secrets":                                `{grant: client_credentials, clientID: x, clientSecretEnv: E, clientSecretFile: /f}`,
		"none with secret":                           `{grant: token_exchange, clientID: x, tokenEndpointAuth: none, clientSecretEnv: E}`,
		"none for service":                           `{grant: client_credentials, clientID: x, tokenEndpointAuth: none}`,
		"unknown auth method":                        `{grant: client_credentials, clientID: x, clientSecretEnv: E, tokenEndpointAuth: tls_client_auth}`,
		"negative step-ups":                          `{grant: client_credentials, clientID: x, clientSecretEnv: E, maxStepUps: -1}`,
		"inline secret refused":                      `{grant: client_credentials, clientID: x, clientSecret: plain}`,
		"code without client":                        `{grant: authorization_code, redirectURL: "http://127.0.0.1:1/cb"}`,
		"code without redirect":                      `{grant: authorization_code, dynamicRegistration: true}`,
		"non-loopback redirect":                      `{grant: authorization_code, dynamicRegistration: true, redirectURL: "http://agent.example:1/cb"}`,
		"https redirect":                             `{grant: authorization_code, dynamicRegistration: true, redirectURL: "https://127.0.0.1:1/cb"}`,
		"redirect without port":                      `{grant: authorization_code, dynamicRegistration: true, redirectURL: "http://127.0.0.1/cb"}`,
		"http metadata URL":                          `{grant: authorization_code, clientIDMetadataURL: "http://agent.example/c.json", redirectURL: "http://127.0.0.1:1/cb"}`,
		"root metadata URL":                          `{grant: authorization_code, clientIDMetadataURL: "https://agent.example/", redirectURL: "http://127.0.0.1:1/cb"}`,
		"pre-registered code without secret":         `{grant: authorization_code, clientID: x, redirectURL: "http://127.0.0.1:1/cb"}`,
		"redirect for service":                       `{grant: client_credentials, clientID: x, clientSecretEnv: E, redirectURL: "http://127.0.0.1:1/cb"}`,
		"jwt without key":                            `{grant: client_credentials, clientID: x, tokenEndpointAuth: private_key_jwt}`,
		"jwt with secret":                            `{grant: client_credentials, clientID: x, tokenEndpointAuth: private_key_jwt, privateKeyFile: /k, clientSecretEnv: E}`,
		"key without jwt":                            `{grant: client_credentials, clientID: x, clientSecretEnv: E, privateKeyFile: /k}`,
		"unknown verification":                       `{grant: client_credentials, clientID: x, clientSecretEnv: E, tokenVerification: introspection}`,
		"introspection, none":                        `{grant: token_exchange, clientID: x, tokenEndpointAuth: none, introspection: {}}`,
		"introspection, unverified":                  `{grant: client_credentials, clientID: x, clientSecretEnv: E, tokenVerification: unverified, introspection: {}}`,
		"introspection ttl":                          `{grant: client_credentials, clientID: x, clientSecretEnv: E, introspection: {cacheSeconds: -1}}`,
		"introspection http":                         `{grant: client_credentials, clientID: x, clientSecretEnv: E, introspection: {endpoint: "http://as.example/introspect"}}`,
		"introspection http, loopback-looking name":  `{grant: client_credentials, clientID: x, clientSecretEnv: E, introspection: {endpoint: "http://127.0.0.1.as.example/introspect"}}`,
		"introspection http, localhost-looking name": `{grant: client_credentials, clientID: x, clientSecretEnv: E, introspection: {endpoint: "http://localhost.as.example/introspect"}}`,
		"introspection unknown":                      `{grant: client_credentials, clientID: x, clientSecretEnv: E, introspection: {ttl: 5}}`,
	}
	for name, o := range bad {
		if _, err := Parse([]byte("upstreams:\n- name: a\n  url: https://a.example/mcp\n  oauth: " + o + "\n")); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	for name, u := range map[string]string{
		"with static token": "  url: https://a.example/mcp\n  tokenEnv: T\n",
		"stdio":             "  command: [x]\n",
	} {
		if _, err := Parse([]byte("upstreams:\n- name: a\n" + u + "  oauth: {grant: client_credentials, clientID: x, clientSecretEnv: E}\n")); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestIdentityProviderValidation(t *testing.T) {
	c, err := Parse([]byte("identityProvider: {issuer: https://idp.example, audience: agent, jwksURL: https://idp.example/keys}\n"))
	if err != nil || c.IdentityProvider() == nil || c.IdentityProvider().Audience != "agent" {
		t.Fatalf("%v %+v", err, c)
	}
	for name, y := range map[string]string{
		"no audience":     "identityProvider: {issuer: https://idp.example, jwksURL: https://idp.example/keys}\n",
		"plain-http JWKS": "identityProvider: {issuer: https://idp.example, audience: a, jwksURL: http://idp.example/keys}\n",
		"plain-http JWKS on a loopback-looking name": "identityProvider: {issuer: https://idp.example, audience: a, jwksURL: http://127.0.0.1.idp.example/keys}\n",
		"unknown claim key":                          "identityProvider: {issuer: https://idp.example, audience: a, jwksURL: https://idp.example/keys, claims: {role: r}}\n",
		"reserved name":                              "principals: [{name: 'idp:alice', principalClass: dev, tokenSHA256: 'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'}]\n",
	} {
		if _, err := Parse([]byte(y)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestSocketPrincipalValidation(t *testing.T) {
	c, err := Parse([]byte("socketPrincipals:\n- {name: ci, principalClass: automation, uid: 1001}\n- {name: devs, principalClass: developer, gid: 100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := c.PeerToken(1001, 100)
	if id, err := c.Authenticate(tok); !ok || err != nil || id.Name != "ci" {
		t.Fatalf("uid 1001: %v %v %+v", ok, err, id)
	}
	tok, ok = c.PeerToken(5, 100)
	if id, err := c.Authenticate(tok); !ok || err != nil || id.Name != "devs" {
		t.Fatalf("gid 100: %v %v %+v", ok, err, id)
	}
	if _, ok := c.PeerToken(5, 5); ok {
		t.Fatal("an unmapped peer got a token")
	}
	for name, y := range map[string]string{
		"neither": "socketPrincipals: [{name: a, principalClass: b}]\n",
		"both":    "socketPrincipals: [{name: a, principalClass: b, uid: 1, gid: 1}]\n",
		"no name": "socketPrincipals: [{principalClass: b, uid: 1}]\n",
	} {
		if _, err := Parse([]byte(y)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// One name is one principal: sessions, workflows, held calls and limits
// are keyed by the name, so two entries that share a name but not an
// identity would share them too (a tokenless default principal named like
// a token principal would own that principal's sessions and workflows).
// Entries with the same name and the same identity (a token being
// rotated, two socket mappings of one principal) stay allowed.
func TestOneNameOneIdentity(t *testing.T) {
	for name, y := range map[string]string{
		"token principals, other class":     "principals:\n- {name: a, principalClass: dev, tokenSHA256: " + digest("t1") + "}\n- {name: a, principalClass: admin, tokenSHA256: " + digest("t2") + "}\n",
		"token principals, other tenant":    "principals:\n- {name: a, principalClass: dev, tenantClass: x, tokenSHA256: " + digest("t1") + "}\n- {name: a, principalClass: dev, tenantClass: z, tokenSHA256: " + digest("t2") + "}\n",
		"token principals, other workflows": "principals:\n- {name: a, principalClass: dev, workflows: [w1], tokenSHA256: " + digest("t1") + "}\n- {name: a, principalClass: dev, tokenSHA256: " + digest("t2") + "}\n",
		"token principals, other reporting": "principals:\n- {name: a, principalClass: dev, reportWorkflows: true, tokenSHA256: " + digest("t1") + "}\n- {name: a, principalClass: dev, tokenSHA256: " + digest("t2") + "}\n",
		"default like a token principal":    "principals:\n- {name: a, principalClass: admin, tokenSHA256: " + digest("t1") + "}\ndefaultPrincipal: {name: a, principalClass: anonymous}\n",
		"socket like a token principal":     "principals:\n- {name: a, principalClass: admin, tokenSHA256: " + digest("t1") + "}\nsocketPrincipals:\n- {name: a, principalClass: dev, uid: 1}\n",
		"socket principals":                 "socketPrincipals:\n- {name: a, principalClass: dev, uid: 1}\n- {name: a, principalClass: ops, gid: 2}\n",
	} {
		if _, err := Parse([]byte(y)); !errors.Is(err, ErrInvalid) || !strings.Contains(fmt.Sprint(err), `"a"`) {
			t.Errorf("%s: err = %v, want ErrInvalid naming the principal", name, err)
		}
	}
	for name, y := range map[string]string{
		"rotated token":       "principals:\n- {name: a, principalClass: dev, workflows: [w1], tokenSHA256: " + digest("t1") + "}\n- {name: a, principalClass: dev, workflows: [w1], tokenSHA256: " + digest("t2") + "}\n",
		"two socket mappings": "socketPrincipals:\n- {name: a, principalClass: dev, uid: 1}\n- {name: a, principalClass: dev, gid: 2}\n",
		"unnamed default":     "principals:\n- {name: a, principalClass: dev, tokenSHA256: " + digest("t1") + "}\ndefaultPrincipal: {principalClass: anonymous}\n",
	} {
		if _, err := Parse([]byte(y)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func digest(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// An upstream's auth class is how the agent authenticates to it, the
// class its receipts record and evidence must match.
func TestUpstreamAuthClass(t *testing.T) {
	for _, tc := range []struct {
		u    Upstream
		want string
	}{
		{Upstream{URL: "https://a.example/mcp"}, readiness.AuthKeyless},
		{Upstream{URL: "https://a.example/mcp", Headers: map[string]string{"X-Team": "a"}}, readiness.AuthKeyless},
		{Upstream{URL: "https://a.example/mcp", TokenEnv: "TOKEN"}, readiness.AuthBearer},
		{Upstream{URL: "https://a.example/mcp", TokenFile: "/run/token"}, readiness.AuthBearer},
		{Upstream{URL: "https://a.example/mcp", TokenEnv: "TOKEN", OAuth: &OAuth{Grant: GrantTokenExchange}}, "oauth:token_exchange"},
		{Upstream{Command: []string{"server"}, Env: map[string]string{"API_KEY": "x"}}, readiness.AuthStdio},
	} {
		if got := tc.u.AuthClass(); got != tc.want || !readiness.IsAuthClass(got) {
			t.Errorf("%+v: auth class %q, want %q", tc.u, got, tc.want)
		}
	}
}

// An upstream's headers are refused when they would carry a credential in
// clear in the file (and past the auth class the receipts record), or take
// over a header the agent sets itself (the session, the protocol version,
// the framing); a header or token on a command, which speaks no HTTP, is
// refused rather than ignored. Before, all of these were accepted.
// A credential the agent presents to an upstream never crosses the network
// in clear: a static token or OAuth for an http URL is refused unless the
// host is a loopback address. Before, tokenFile with http://remote was
// accepted and the token sent unencrypted with every call.
func TestUpstreamCredentialsNeedTLS(t *testing.T) {
	for name, u := range map[string]string{
		"token file":         "  url: http://mcp.example.com/mcp\n  tokenFile: /dev/null\n",
		"token env":          "  url: http://10.0.0.7:8080/mcp\n  tokenEnv: TOKEN\n",
		"oauth":              "  url: http://mcp.example.com/mcp\n  oauth: {grant: client_credentials, clientId: c, clientSecretEnv: S}\n",
		"loopback lookalike": "  url: http://127.0.0.1.example.com/mcp\n  tokenEnv: TOKEN\n",
	} {
		if _, err := Parse([]byte("upstreams:\n- name: a\n" + u)); !errors.Is(err, ErrInvalid) || !strings.Contains(fmt.Sprint(err), "https") {
			t.Errorf("%s: err = %v, want ErrInvalid asking for https", name, err)
		}
	}
	for name, u := range map[string]string{
		"https":         "  url: https://mcp.example.com/mcp\n  tokenEnv: TOKEN\n",
		"loopback ipv4": "  url: http://127.0.0.1:8080/mcp\n  tokenEnv: TOKEN\n",
		"loopback ipv6": "  url: http://[::1]:8080/mcp\n  tokenEnv: TOKEN\n",
		"localhost":     "  url: http://localhost:8080/mcp\n  tokenEnv: TOKEN\n",
		"keyless http":  "  url: http://mcp.example.com/mcp\n",
	} {
		if _, err := Parse([]byte("upstreams:\n- name: a\n" + u)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestUpstreamHeadersChecked(t *testing.T) {
	for name, u := range map[string]string{
		"authorization":       "  url: https://a.example/mcp\n  headers: {Authorization: Bearer abc}\n",
		"lower-case cookie":   "  url: https://a.example/mcp\n  headers: {cookie: s=1}\n",
		"proxy authorization": "  url: https://a.example/mcp\n  headers: {Proxy-Authorization: Basic x}\n",
		"session":             "  url: https://a.example/mcp\n  headers: {Mcp-Session-Id: s}\n",
		"protocol version":    "  url: https://a.example/mcp\n  headers: {MCP-Protocol-Version: 2024-11-05}\n",
		"method":              "  url: https://a.example/mcp\n  headers: {Mcp-Method: tools/call}\n",
		"content type":        "  url: https://a.example/mcp\n  headers: {Content-Type: text/plain}\n",
		"host":                "  url: https://a.example/mcp\n  headers: {Host: b.example}\n",
		"trace":               "  url: https://a.example/mcp\n  headers: {traceparent: x}\n",
		"bad name":            "  url: https://a.example/mcp\n  headers: {\"X Team\": a}\n",
		"value with newline":  "  url: https://a.example/mcp\n  headers: {X-Team: \"a\\r\\nX-Evil: b\"}\n",
		"headers on command":  "  command: [server]\n  headers: {X-Team: a}\n",
		"token on command":    "  command: [server]\n  tokenEnv: TOKEN\n",
	} {
		if _, err := Parse([]byte("upstreams:\n- name: a\n" + u)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	c, err := Parse([]byte("upstreams:\n- name: a\n  url: https://a.example/mcp\n  headers: {X-Team: search, Accept-Language: en}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := c.Upstream("a"); u.Headers["X-Team"] != "search" || u.AuthClass() != readiness.AuthKeyless {
		t.Fatalf("upstream %+v", u)
	}
}

// ParseOAuth reads an oauth block alone as New reads it under an upstream:
// the same strict decoding and the same validation.
func TestParseOAuth(t *testing.T) {
	o, err := ParseOAuth([]byte("grant: client_credentials\nclientID: p\nclientSecretFile: /run/secret\nscopes: [read]\n"))
	if err != nil || o.Grant != GrantClientCredentials || o.ClientID != "p" || o.ClientSecretFile != "/run/secret" || len(o.Scopes) != 1 {
		t.Fatalf("%+v, %v", o, err)
	}
	if _, err := ParseOAuth([]byte(`{"grant":"jwt_bearer","clientID":"p","tokenEndpointAuth":"none","assertionFile":"/a"}`)); err != nil {
		t.Errorf("JSON: %v", err)
	}
	for name, in := range map[string]string{
		"empty":           "",
		"unknown field":   "grant: client_credentials\nclientID: p\nclientSecretFile: /s\nsecret: x\n",
		"repeated key":    "grant: client_credentials\ngrant: client_credentials\nclientID: p\nclientSecretFile: /s\n",
		"wrong type":      "grant: client_credentials\nclientID: [p]\nclientSecretFile: /s\n",
		"no secret":       "grant: client_credentials\nclientID: p\n",
		"unknown grant":   "grant: password\nclientID: p\nclientSecretFile: /s\n",
		"trailing object": `{"grant":"client_credentials","clientID":"p","clientSecretFile":"/s"} {}`,
	} {
		if _, err := ParseOAuth([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A whole configuration is decoded the same way.
	for _, in := range []string{`{"upstreams":[]} {"upstreams":[{"name":"x","url":"http://x"}]}`,
		"upstreams: []\n---\nprincipals: [{name: a, principalClass: x, tokenSHA256: sha256:00}]\n"} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("configuration with a second document %q: %v, want ErrInvalid", in, err)
		}
	}
	// An empty document after the first is nothing lost.
	if _, err := Parse([]byte("upstreams: []\n---\n")); err != nil {
		t.Errorf("trailing empty document: %v", err)
	}
}

func FuzzParseOAuth(f *testing.F) {
	f.Add([]byte("grant: client_credentials\nclientID: p\nclientSecretFile: /s\n"))
	f.Add([]byte("grant: id_jag\nclientID: p\nclientSecretFile: /s\nenterpriseIdP: {clientID: c, tokenEndpoint: 'https://idp/token', idTokenFile: /t}\n"))
	f.Add([]byte("grant: authorization_code\nclientID: p\ntokenEndpointAuth: none\nredirectURL: 'http://127.0.0.1:1/cb'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseOAuth(data)
		if err == nil && o.validate() != nil {
			t.Fatalf("accepted an invalid block: %+v", o)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error without ErrInvalid: %v", err)
		}
	})
}
