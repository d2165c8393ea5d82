// Package replaytest holds only tests: the adversarial suite of the trust
// chain. It runs a real control plane (controlplane.Server on an embedded
// etcd that serves only TLS and requires client certificates, gRPC with
// mTLS certificates from internal/testpki and the admin,
// agent and reader roles of controlplane/authz) and real subscribing
// agents (agent/subscribe over the Discovery stream), and
// replays every signed artifact kind at every older version against both
// sides:
//
//   - TestReplayEveryKindBothSides: versions 1..4 of TrustPolicy,
//     Declaration, RegistryEntry, Policy and Evidence, then every older
//     version, the held version with other content, an unversioned and a
//     newer but expired one. The control plane's Apply refuses each with
//     its typed reason (rollback, expired) and stores nothing (history and
//     etcd revision unchanged), logging and counting it. Planted straight
//     into etcd, past the write path (a compromised control plane or
//     etcd), each reaches the agent, which NACKs it with its reason and
//     keeps version 4 (both sides count the NACKs), over both Discovery
//     variants (in a state-of-the-world set an expired resource is left out
//     and the held one dropped, as withholding may, except a Policy or a
//     Declaration), after a
//     restart, with its high-water marks file deleted, and with its
//     last-known-good file rewritten to the signed set it held at version 2.
//   - TestNothingRevokedComesBack: a TrustPolicy rotation revokes the org
//     key (and a rotation to a new name follows); every older TrustPolicy
//     and everything the revoked key signed, older and newer, is refused
//     on both sides, before and after an agent restart.
//   - TestCompromisedEtcdIsDenialOnly: etcd holding the TrustPolicy from
//     before a revocation again makes neither side accept the revoked key:
//     the control plane refuses every write below its TrustPolicy
//     high-water mark (kept in its data directory, trust-rolled-back),
//     the agent refuses the older TrustPolicy and the revoked key.
//   - TestTombstoneReplayBothSides (over both Discovery variants):
//     tombstones delete only the exact version and digest they name;
//     replayed, or for an older version, they delete nothing; unsigned
//     removals of a Policy or a TrustPolicy are refused by the agent; a
//     deleted version never comes back, across restarts.
//   - TestDriftReportReplay: drift reports about an older entry revision,
//     stale, expired, unsigned, signed by the wrong key or about another
//     node are refused, counted and logged and create nothing; the genuine
//     one replayed changes nothing, a flood is rate-limited, and the
//     entry's earlier versions cannot lift the suspension.
//   - TestWrongRoleStoresNothing: writes by callers without the admin role
//     store nothing and are counted. The matrix of every RPC against every
//     wrong role (and an agent naming another node) is controlplane/authz's
//     TestEveryRPCEveryWrongRole; controlplane's TestCallersNeedTheirRole
//     runs the same refusals against the real server.
//   - TestEveryKindIsReplayed fails when artifact gains a kind no test of
//     the suite replays (a ReceiptBatch, unversioned, is chained instead:
//     controlplane/ingest's TestRejectsBadBatches).
//
// Every test searches the logs of both sides for key material. Each test
// (and each per-kind subtest) has its own control plane, etcd and agent,
// so they run in parallel: about 15 s, 25-35 s under -race.
//
// Shipped code must not import this package (it has no non-test code).
package replaytest
