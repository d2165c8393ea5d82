package mcpregistry

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Labels a draft carries, apart from any operational claim.
const (
	LabelRegistryStatus  = "mcpready.dev/registry-status"
	LabelRegistryVersion = "mcpready.dev/registry-record-version"
	LabelPublisherMeta   = "mcpready.dev/publisher-metadata"
	// LabelPublisherVerification says how the registry verified the
	// publisher's namespace, as far as the record shows: "github" for an
	// io.github.* name and "domain" (DNS or HTTP proof) for another name in
	// a record carrying the registry's own metadata, "none-recorded" when
	// the record carries none. It is a claim about who controls a name,
	// never about the endpoint.
	LabelPublisherVerification = "mcpready.dev/publisher-verification"
)

// maxName bounds a draft's name (artifact.ValidateName).
const maxName = 253

// ShortenName bounds name to max bytes (max > 13): a longer name is cut,
// trailing "/" dropped, and suffixed with "/" and 12 hex digits of the
// SHA-256 of the whole name, so that long names sharing a prefix stay
// apart. Drafts bounds its names with it to maxName; the import bounds
// the file names it derives from them.
func ShortenName(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:max-13], "/") + "/" + hex.EncodeToString(sum[:6])
}

// verification is the LabelPublisherVerification value of r.
func verification(r Record) string {
	switch {
	case !r.HasOfficial:
		return "none-recorded"
	case strings.HasPrefix(r.Server.Name, "io.github."):
		return "github"
	}
	return "domain"
}

// Drafts turns records into unsigned CANDIDATE RegistryEntry drafts, one
// per Streamable HTTP remote: the server's identity and endpoint, the
// discovery source (the registry's record URL), the record's version and
// status as labels, whether the publisher supplied metadata, and how the
// registry verified the publisher's namespace. Tools are
// unknown until the server is enrolled, so the identity names none, and
// the state is CANDIDATE: an import never qualifies anything. Records
// without such a remote (packages only) give no draft. Drafts are named
// "imported/<server>@<version>", cleaned (artifact.CleanName) and bounded
// to maxName (ShortenName).
func Drafts(base string, records []Record) []*artifact.Object {
	var out []*artifact.Object
	for _, r := range records {
		n := 0
		for _, rm := range r.Server.Remotes {
			if rm.Type != "streamable-http" || rm.URL == "" {
				continue
			}
			n++
			name := "imported/" + artifact.CleanName(r.Server.Name) + "@" + artifact.CleanName(r.Server.Version)
			if n > 1 {
				name += "/remote-" + strconv.Itoa(n)
			}
			name = ShortenName(name, maxName)
			source := strings.TrimSuffix(base, "/") + "/v0/servers/" + url.PathEscape(r.Server.Name) + "/versions/" + url.PathEscape(r.Server.Version)
			e := &mcpreadyv1.RegistryEntry{
				Provenance:      &mcpreadyv1.Provenance{Issuer: "mcp-registry-import", SourceUri: source},
				Identity:        &mcpreadyv1.ToolIdentity{ServerName: r.Server.Name, ServerVersion: r.Server.Version, Endpoint: rm.URL},
				State:           mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE,
				DiscoverySource: "mcp-registry:" + source,
			}
			if r.HasOfficial && !r.Official.PublishedAt.IsZero() {
				e.Provenance.IssuedAt = timestamppb.New(r.Official.PublishedAt)
			}
			obj := artifact.New(artifact.KindRegistryEntry, name, e)
			status := r.Official.Status
			if !r.HasOfficial {
				status = "unknown"
			}
			obj.Metadata.Labels = map[string]string{LabelRegistryStatus: artifact.CleanName(status),
				LabelRegistryVersion: artifact.CleanName(r.Server.Version), LabelPublisherMeta: map[bool]string{true: "present", false: "absent"}[len(r.Publisher) > 0],
				LabelPublisherVerification: verification(r)}
			out = append(out, obj)
		}
	}
	return out
}
