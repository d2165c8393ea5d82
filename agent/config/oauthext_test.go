package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOAuthJWTBearerAndDPoPValidation(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "workload")
	if err := os.WriteFile(wl, []byte(" the.workload.jwt \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := `upstreams:
- name: a
  url: https://a.example/mcp
  oauth: {grant: jwt_bearer, clientID: wl, tokenEndpointAuth: none, assertionFile: ` + wl + `, dpop: {}}
- name: b
  url: https://b.example/mcp
  oauth: {grant: id_jag, clientID: app, clientSecretEnv: S, enterpriseIdP: {tokenEndpoint: "https://idp.example/token", clientID: agent, idTokenEnv: IDT}, dpop: {keyFile: /k.pem, maxNonceRetries: 2}}
- name: c
  url: https://c.example/mcp
  oauth: {grant: authorization_code, dynamicRegistration: true, redirectURL: "http://127.0.0.1:1/cb", dpop: {}}
`
	c, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Upstream("a")
	if s, err := a.OAuth.Assertion(); err != nil || s != "the.workload.jwt" {
		t.Fatalf("assertion = %q, %v", s, err)
	}
	b, _ := c.Upstream("b")
	if _, err := b.OAuth.EnterpriseIdP.IDToken(); err == nil {
		t.Fatal("an unset idTokenEnv read")
	}
	t.Setenv("IDT", "id.token")
	if s, err := b.OAuth.EnterpriseIdP.IDToken(); err != nil || s != "id.token" {
		t.Fatalf("id token = %q, %v", s, err)
	}
	idp := `enterpriseIdP: {tokenEndpoint: "https://idp.example/token", clientID: agent, idTokenFile: /t}`
	bad := map[string]string{
		"jwt_bearer without assertion":         `{grant: jwt_bearer, clientID: x, tokenEndpointAuth: none}`,
		"two assertion sources":                `{grant: jwt_bearer, clientID: x, tokenEndpointAuth: none, assertionFile: /a, assertionEnv: A}`,
		"assertion for another grant":          `{grant: client_credentials, clientID: x, clientSecretEnv: E, assertionFile: /a}`,
		"jwt_bearer without client id":         `{grant: jwt_bearer, tokenEndpointAuth: none, assertionFile: /a}`,
		"id_jag without idp":                   `{grant: id_jag, clientID: x, clientSecretEnv: E}`,
		"idp for another grant":                `{grant: client_credentials, clientID: x, clientSecretEnv: E, ` + idp + `}`,
		"idp without client id":                `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "https://idp.example/token", idTokenFile: /t}}`,
		"idp over http":                        `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "http://idp.example/token", clientID: a, idTokenFile: /t}}`,
		"idp over http, loopback-looking name": `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "http://localhost.idp.example/token", clientID: a, idTokenFile: /t}}`,
		"idp without id token":                 `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "https://idp.example/token", clientID: a}}`,
		"idp with two id tokens":               `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "https://idp.example/token", clientID: a, idTokenFile: /t, idTokenEnv: T}}`,
		"idp with two secrets":                 `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "https://idp.example/token", clientID: a, idTokenFile: /t, clientSecretEnv: S, clientSecretFile: /s}}`,
		"idp inline id token refused":          `{grant: id_jag, clientID: x, clientSecretEnv: E, enterpriseIdP: {tokenEndpoint: "https://idp.example/token", clientID: a, idToken: eyJ}}`,
		"negative nonce retries":               `{grant: client_credentials, clientID: x, clientSecretEnv: E, dpop: {maxNonceRetries: -1}}`,
		"dpop inline key refused":              `{grant: client_credentials, clientID: x, clientSecretEnv: E, dpop: {key: abc}}`,
		"jwt_bearer inline assertion":          `{grant: jwt_bearer, clientID: x, tokenEndpointAuth: none, assertion: eyJ}`,
		"id_jag with the assertion too":        `{grant: id_jag, clientID: x, clientSecretEnv: E, assertionFile: /a, ` + idp + `}`,
	}
	for name, o := range bad {
		if _, err := Parse([]byte("upstreams:\n- name: a\n  url: https://a.example/mcp\n  oauth: " + o + "\n")); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}
