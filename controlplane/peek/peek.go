// Package peek decodes the artifact inside a stored bundle WITHOUT
// verifying its signature. The control plane uses it only on bundles it
// verified when they were written (to read names, states and expiries for
// display and lifecycle bookkeeping). It must never be used to decide
// whether to trust a bundle; that is sign.Trust.Verify's job.
package peek

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpready/mcpready/artifact"
)

// ErrMalformed is returned for anything that is not a bundle holding an
// mcpready artifact.
var ErrMalformed = errors.New("malformed bundle")

type bundle struct {
	DSSE *struct {
		Payload []byte `json:"payload"` // base64 in JSON, decoded by encoding/json
	} `json:"dsseEnvelope"`
}

type statement struct {
	Predicate json.RawMessage `json:"predicate"`
}

// Object returns the artifact carried by a Sigstore bundle's DSSE payload.
func Object(b []byte) (*artifact.Object, error) {
	var bd bundle
	if err := json.Unmarshal(b, &bd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if bd.DSSE == nil || len(bd.DSSE.Payload) == 0 {
		return nil, fmt.Errorf("%w: no DSSE payload", ErrMalformed)
	}
	var st statement
	if err := json.Unmarshal(bd.DSSE.Payload, &st); err != nil {
		return nil, fmt.Errorf("%w: statement: %v", ErrMalformed, err)
	}
	if len(st.Predicate) == 0 {
		return nil, fmt.Errorf("%w: statement has no predicate", ErrMalformed)
	}
	obj, err := artifact.Parse(st.Predicate)
	if err != nil {
		return nil, fmt.Errorf("%w: predicate: %v", ErrMalformed, err)
	}
	return obj, nil
}
