//go:build deps

package deps

import (
	_ "github.com/gowebpki/jcs"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/sigstore/sigstore-go/pkg/bundle"
	_ "github.com/sigstore/sigstore-go/pkg/verify"
	_ "github.com/sigstore/sigstore/pkg/signature"
	_ "github.com/sigstore/sigstore/pkg/cryptoutils"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "sigs.k8s.io/yaml"
	_ "github.com/secure-systems-lab/go-securesystemslib/dsse"
)
