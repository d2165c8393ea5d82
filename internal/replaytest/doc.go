// Package replaytest holds only tests: the adversarial suite of the trust
// chain. It runs a real control plane (controlplane.Server on embedded
// etcd, gRPC with mTLS certificates from internal/testpki and the admin,
// agent and reader roles of controlplane/authz) and real subscribing
// agents (agent/subscribe over the Discovery stream), and replays every
// signed artifact kind at every older version against both sides:
//
//   - the control plane's Apply must refuse each replay with its typed
//     reason (rollback, expired) and store nothing (history and etcd
//     revision unchanged), counting and logging the refusal;
//   - an agent fed the same bundles by a hostile control plane (written
//     straight into etcd, past the write path) must NACK each with its
//     reason and keep the version it holds, also after a restart, with its
//     last-known-good file rewritten to an older signed set, or with its
//     high-water marks file deleted;
//   - nothing revoked comes back: after a TrustPolicy rotation revokes a
//     key, every older TrustPolicy and everything the revoked key signed
//     is refused on both sides;
//   - tombstones delete only the exact version and digest they name, a
//     replayed one deletes nothing, and an unsigned removal of a Policy is
//     refused by the agent;
//   - drift reports naming an older entry revision, stale or unsigned are
//     refused and create nothing;
//   - calls without the role for an RPC are refused and store nothing.
//     The full matrix of every RPC against every wrong role (and an agent
//     naming another node) is controlplane/authz's
//     TestEveryRPCEveryWrongRole; controlplane's TestCallersNeedTheirRole
//     runs the same refusals against the real server. This suite adds that
//     a refused write stores nothing and is counted.
//
// Logs of both sides are captured and searched for key material.
//
// Shipped code must not import this package (it has no non-test code).
package replaytest
