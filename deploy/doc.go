// Package deploy holds mcpready's deployment material: Kubernetes manifests
// (kubernetes/), systemd units (systemd/) and example configuration and
// artifacts (examples/). It has no code; its tests parse every file so a
// broken manifest fails CI without a cluster or kubectl. It must not hold
// secrets or private keys: examples reference them by path.
package deploy
