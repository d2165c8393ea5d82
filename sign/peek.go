package sign

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpready/mcpready/artifact"
)

// ErrPeek is returned by Peek for anything that is not a bundle holding an
// mcpready artifact.
var ErrPeek = errors.New("malformed bundle")

type peekBundle struct {
	DSSE *struct {
		Payload []byte `json:"payload"` // base64 in JSON, decoded by encoding/json
	} `json:"dsseEnvelope"`
}

type peekStatement struct {
	Predicate json.RawMessage `json:"predicate"`
}

// Peek decodes the artifact carried by a Sigstore bundle's DSSE payload
// WITHOUT verifying its signature. It is for bundles that were verified
// when they were stored (to read names, states and expiries for display and
// bookkeeping). It must never be used to decide whether to trust a bundle;
// that is Trust.Verify's job.
func Peek(b []byte) (*artifact.Object, error) {
	var bd peekBundle
	if err := json.Unmarshal(b, &bd); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPeek, err)
	}
	if bd.DSSE == nil || len(bd.DSSE.Payload) == 0 {
		return nil, fmt.Errorf("%w: no DSSE payload", ErrPeek)
	}
	var st peekStatement
	if err := json.Unmarshal(bd.DSSE.Payload, &st); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrPeek, err)
	}
	if len(st.Predicate) == 0 {
		return nil, fmt.Errorf("%w: statement has no predicate", ErrPeek)
	}
	obj, err := artifact.Parse(st.Predicate)
	if err != nil {
		return nil, fmt.Errorf("%w: predicate: %w", ErrPeek, err)
	}
	return obj, nil
}
