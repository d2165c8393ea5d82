// Package mcpregistry reads the official MCP Registry's API (GET /v0/servers,
// cursor pagination, server.json records with namespaced _meta) and turns
// its records into unsigned CANDIDATE RegistryEntry drafts for review.
//
// A registry record is discovery metadata: it says a server was published
// under a name, not that it works. This package records the discovery
// source, the registry record's version and status and the publisher's
// metadata separately from any operational claim; it must never mark an
// entry QUALIFIED, sign anything, or contact the servers it lists.
package mcpregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/mcpready/mcpready/internal/redirect"
)

// The namespaces of registry metadata in a record's _meta.
const (
	MetaOfficial  = "io.modelcontextprotocol.registry/official"
	MetaPublisher = "io.modelcontextprotocol.registry/publisher-provided"
)

// Errors.
var (
	ErrURL      = errors.New("mcpregistry: bad registry URL")
	ErrResponse = errors.New("mcpregistry: bad registry response")
	ErrTooLarge = errors.New("mcpregistry: registry page too large")
)

// maxPageBytes bounds one page of the listing.
const maxPageBytes = 8 << 20

// Remote is one way to reach a server remotely.
type Remote struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// Package is one installable package of a server (recorded, never run).
type Package struct {
	RegistryType string `json:"registryType"`
	Identifier   string `json:"identifier"`
	Version      string `json:"version"`
}

// Server is the server.json part of a record.
type Server struct {
	Name        string          `json:"name"`
	Version     string          `json:"version"`
	Description string          `json:"description"`
	WebsiteURL  string          `json:"websiteUrl"`
	Remotes     []Remote        `json:"remotes"`
	Packages    []Package       `json:"packages"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// Official is the registry's own metadata about a record.
type Official struct {
	Status      string    `json:"status"`
	PublishedAt time.Time `json:"publishedAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	IsLatest    bool      `json:"isLatest"`
}

// Record is one server version as the registry lists it.
type Record struct {
	Server   Server
	Official Official
	// HasOfficial says whether the registry's own metadata was present.
	HasOfficial bool
	// Publisher is the publisher-provided metadata, verbatim.
	Publisher json.RawMessage
}

type page struct {
	Servers  []json.RawMessage `json:"servers"`
	Metadata struct {
		NextCursor string `json:"nextCursor"`
	} `json:"metadata"`
}

type entry struct {
	Server *Server                    `json:"server"`
	Meta   map[string]json.RawMessage `json:"_meta"`
}

// Options configure List. The zero value reads at most 100 pages of 100
// records with a 30 s budget per page and keeps only the latest version of
// each server.
type Options struct {
	// HTTPClient; nil: a client with a 30 s timeout that follows no
	// redirect to another origin.
	HTTPClient *http.Client
	// MaxPages bounds the walk. Zero: 100.
	MaxPages int
	// PageSize is the limit asked per page. Zero: 100.
	PageSize int
	// AllVersions keeps every version, not only the latest. Zero: latest.
	AllVersions bool
}

// Listing is what List read.
type Listing struct {
	Records []Record
	Pages   int
	// Partial names why the walk stopped before the end ("" when it
	// reached it): "page-limit" or "cursor-loop".
	Partial string
}

// List walks base's /v0/servers.
func List(ctx context.Context, base string, o Options) (*Listing, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q", ErrURL, base)
	}
	if o.MaxPages <= 0 {
		o.MaxPages = 100
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	c := o.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if err := redirect.SameOrigin(r, via); err != nil {
				return fmt.Errorf("%w: %w", ErrResponse, err)
			}
			return nil
		}}
	}
	l := &Listing{}
	seen := map[string]bool{}
	cursor := ""
	for {
		if l.Pages >= o.MaxPages {
			l.Partial = "page-limit"
			return l, nil
		}
		p, err := fetch(ctx, c, u, cursor, o.PageSize)
		if err != nil {
			return l, fmt.Errorf("page %d: %w", l.Pages+1, err)
		}
		l.Pages++
		for i, raw := range p.Servers {
			rec, err := decode(raw)
			if err != nil {
				return l, fmt.Errorf("page %d, record %d: %w", l.Pages, i+1, err)
			}
			if rec.Official.Status == "deleted" || (!o.AllVersions && rec.HasOfficial && !rec.Official.IsLatest) {
				continue
			}
			l.Records = append(l.Records, rec)
		}
		next := p.Metadata.NextCursor
		if next == "" {
			return l, nil
		}
		if seen[next] {
			l.Partial = "cursor-loop"
			return l, nil
		}
		seen[next], cursor = true, next
	}
}

func fetch(ctx context.Context, c *http.Client, base *url.URL, cursor string, limit int) (*page, error) {
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v0/servers"
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrURL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: HTTP %d", ErrResponse, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxPageBytes {
		return nil, ErrTooLarge
	}
	var p page
	if err := unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrResponse, err)
	}
	return &p, nil
}

// decode reads one listed record: {"server": {...}, "_meta": {...}}, or a
// flat server.json whose _meta holds the registry's metadata. Every _meta
// must be an object; metadata that is null is absent.
func decode(raw json.RawMessage) (Record, error) {
	var e entry
	if err := unmarshal(raw, &e); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrResponse, err)
	}
	if e.Server == nil {
		var s Server
		if err := unmarshal(raw, &s); err != nil {
			return Record{}, fmt.Errorf("%w: %w", ErrResponse, err)
		}
		e.Server = &s // its _meta is the record's (e.Meta)
	}
	if e.Server.Name == "" || e.Server.Version == "" {
		return Record{}, fmt.Errorf("%w: a record without name or version", ErrResponse)
	}
	r := Record{Server: *e.Server}
	var sm map[string]json.RawMessage
	if len(e.Server.Meta) > 0 {
		if err := json.Unmarshal(e.Server.Meta, &sm); err != nil {
			return Record{}, fmt.Errorf("%w: server _meta: %w", ErrResponse, err)
		}
	}
	if off, ok := e.Meta[MetaOfficial]; ok && string(off) != "null" {
		if err := unmarshal(off, &r.Official); err != nil {
			return Record{}, fmt.Errorf("%w: %s: %w", ErrResponse, MetaOfficial, err)
		}
		r.HasOfficial = true
	}
	if pub, ok := sm[MetaPublisher]; ok && string(pub) != "null" {
		r.Publisher = pub
	} else if pub, ok := e.Meta[MetaPublisher]; ok && string(pub) != "null" {
		r.Publisher = pub
	}
	return r, nil
}

// unmarshal is json.Unmarshal into v, a pointer to a struct, refusing an
// object key that encoding/json would take for a field although it is not
// spelled as the field's name ("Name" or "NAME" for "name"): the registry's
// keys are case-sensitive, and a second spelling must not replace the value
// under the first.
func unmarshal(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	return exactKeys(raw, reflect.TypeOf(v).Elem())
}

// exactKeys checks the keys of raw, valid JSON decoding into t, and of the
// objects in it that decode into structs.
func exactKeys(raw []byte, t reflect.Type) error {
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return exactKeys(raw, t.Elem())
	case reflect.Slice:
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items) // null: none
		for _, it := range items {
			if err := exactKeys(it, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Struct:
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m) // null: none
		for key, val := range m {
			for f := range t.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" {
					name = f.Name
				}
				if key == name {
					if err := exactKeys(val, f.Type); err != nil {
						return err
					}
				} else if strings.EqualFold(key, name) {
					return fmt.Errorf("key %q where %q is meant", key, name)
				}
			}
		}
	}
	return nil
}
