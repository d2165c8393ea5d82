// Package docs holds mcpready's user guides (platform, operator,
// compliance) and its reference. It has no code: its test regenerates the
// artifact field tables of reference.md from the protobuf descriptors and
// the comments in proto/, and the per-kind enforcement tables from
// artifact.Enforcement, and fails when the committed tables are stale.
//
// It must not say what a field does by hand where the generated tables say
// it: whether a field is enforced is decided in package artifact only.
package docs
