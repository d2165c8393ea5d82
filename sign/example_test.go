package sign_test

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

func Example() {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	obj, _ := artifact.Parse([]byte(`
apiVersion: mcpready.dev/v1
kind: Policy
metadata: {name: example.org/default}
spec: {inventory: ["com.example/*"]}
`))
	bundle, _, err := sign.Sign(obj, key)
	if err != nil {
		panic(err)
	}
	v, err := sign.VerifyWithKey(bundle, key.Public())
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Object.Kind, v.Object.Metadata.Name)
	// Output: Policy example.org/default
}

func ExampleTrust() {
	rootKey, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	providerKey, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	providerPEM, _ := sign.MarshalPublicKey(providerKey.Public())
	providerID, _ := sign.KeyID(providerKey.Public())

	// The root key grants the provider Declarations for com.example/*.
	tp := artifact.New(artifact.KindTrustPolicy, "example.org/trust", &mcpreadyv1.TrustPolicy{
		Keys: []*mcpreadyv1.KeyGrant{{
			KeyId: providerID, PublicKey: string(providerPEM), Name: "provider",
			Kinds: []string{"Declaration"}, Scopes: []string{"com.example/*"},
		}},
	})
	tpBundle, _, _ := sign.Sign(tp, rootKey)
	now := time.Now()
	trust, err := sign.NewTrust(tpBundle, rootKey.Public(), now)
	if err != nil {
		panic(err)
	}

	inScope, _, _ := sign.Sign(artifact.New(artifact.KindDeclaration, "com.example/docs", &mcpreadyv1.Declaration{}), providerKey)
	outOfScope, _, _ := sign.Sign(artifact.New(artifact.KindDeclaration, "com.other/docs", &mcpreadyv1.Declaration{}), providerKey)
	policy, _, _ := sign.Sign(artifact.New(artifact.KindPolicy, "com.example/p", &mcpreadyv1.Policy{}), providerKey)

	for _, b := range [][]byte{inScope, outOfScope, policy} {
		v, err := trust.Verify(b, now)
		if err != nil {
			fmt.Println("rejected:", sign.ReasonOf(err))
			continue
		}
		fmt.Println("verified:", v.Object.Kind, v.Object.Metadata.Name)
	}
	// Output:
	// verified: Declaration com.example/docs
	// rejected: out-of-scope
	// rejected: kind-not-allowed
}

func ExampleLoadPrivateKey() {
	key, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	pemData, _ := sign.MarshalPrivateKey(key, []byte("correct horse"))
	if _, err := sign.LoadPrivateKey(pemData, []byte("wrong")); err != nil {
		fmt.Println(err)
	}
	// Output: wrong password for private key
}
