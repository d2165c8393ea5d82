// Package docs holds mcpready's user guides (platform, operator,
// compliance) and its reference. It has no code: its test regenerates the
// artifact field tables of reference.md from the protobuf descriptors and
// the comments in proto/, and fails when the committed tables are stale.
package docs
