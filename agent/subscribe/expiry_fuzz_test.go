package subscribe

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// FuzzWithhold: whatever the expiries (seconds from now; negative is
// none), a snapshot uses nothing that has expired, withholds the registry
// entries of a server whose Declaration expired, or is gone unsigned
// (its high-water mark not deleted), and nothing else that is unexpired, uses nothing under an expired TrustPolicy, and its next
// expiry is in the future.
func FuzzWithhold(f *testing.F) {
	f.Add(int64(-1), int64(10), int64(-1), uint8(3), int64(0), uint8(1))
	f.Add(int64(5), int64(-1), int64(0), uint8(1), int64(7), uint8(2))
	f.Add(int64(0), int64(0), int64(0), uint8(0), int64(0), uint8(0))
	f.Fuzz(func(t *testing.T, trustIn, policyIn, declIn int64, entries uint8, at int64, otherMark uint8) {
		t0 := time.Unix(1_800_000_000, 0)
		now := t0.Add(time.Duration(at%1000) * time.Second)
		res := func(k artifact.Kind, name string, in int64, spec func(*artifact.Object)) *Resource {
			pv := &mcpreadyv1.Provenance{Version: "1"}
			if in >= 0 {
				pv.ExpiresAt = timestamppb.New(t0.Add(time.Duration(in%1000) * time.Second))
			}
			o := testpki.Versioned(k, name, nil, pv)
			if spec != nil {
				spec(o)
			}
			return &Resource{Name: name, Kind: k, Version: "1", Verified: &sign.Verified{Object: o}}
		}
		s := &Snapshot{resources: map[artifact.Kind]map[string]*Resource{
			artifact.KindTrustPolicy: {"default": res(artifact.KindTrustPolicy, "default", trustIn, nil)},
			artifact.KindPolicy:      {"p": res(artifact.KindPolicy, "p", policyIn, nil)},
			artifact.KindDeclaration: {"srv": res(artifact.KindDeclaration, "srv", declIn, nil)},
		}}
		s.resources[artifact.KindRegistryEntry] = map[string]*Resource{}
		for i := range int(entries % 4) {
			server := []string{"srv", "other"}[i%2]
			name := server + "/" + string(rune('a'+i))
			s.resources[artifact.KindRegistryEntry][name] = res(artifact.KindRegistryEntry, name, -1, func(o *artifact.Object) {
				o.Spec.(*mcpreadyv1.RegistryEntry).Identity = &mcpreadyv1.ToolIdentity{ServerName: server}
			})
		}
		// "other" has no Declaration held; its mark is absent (0), live
		// (1: the Declaration is gone unsigned, e.g. expired before a
		// restart) or deleted by a signed tombstone (2)
		var ms marks
		if otherMark%3 != 0 {
			ms = marks{artifact.KindDeclaration: {"other": {Version: "1", Digest: "sha256:00", Deleted: otherMark%3 == 2}}}
		}
		s.withhold(now, ms)
		expired := func(r *Resource) bool { e, ok := expiresAt(r); return ok && !now.Before(e) }
		trustExpired := expired(s.resources[artifact.KindTrustPolicy]["default"])
		declExpired := expired(s.resources[artifact.KindDeclaration]["srv"])
		for k, m := range s.resources {
			for n, r := range m {
				used := s.Get(k, n) != nil
				want := !trustExpired && !expired(r)
				if k == artifact.KindRegistryEntry {
					switch r.Verified.Object.Spec.(*mcpreadyv1.RegistryEntry).GetIdentity().GetServerName() {
					case "srv":
						want = want && !declExpired
					case "other":
						want = want && otherMark%3 != 1
					}
				}
				if used != want {
					t.Fatalf("%s %q used %v, want %v (now %v)", k, n, used, want, now)
				}
				if !used && s.Withheld(k, n) == "" {
					t.Fatalf("%s %q withheld without a reason", k, n)
				}
			}
		}
		if next, ok := s.nextExpiry(); ok && !now.Before(next) {
			t.Fatalf("next expiry %v is not after now %v", next, now)
		}
		if trustExpired && !s.Empty() {
			t.Fatal("something is used under an expired TrustPolicy")
		}
	})
}
