package validate

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// The injection tripwire is a heuristic, not a wall: it catches common
// tool-poisoning and indirect-injection patterns so they are blocked and
// reviewed, and it cannot prove a text safe. The rules, each tested:
//
//   - invisible-unicode: Unicode tag characters (U+E0000–U+E007F), bidi
//     overrides and isolates (U+202A–U+202E, U+2066–U+2069), zero-width
//     space / word joiner / BOM inside text, or a run of 4+ variation
//     selectors (data smuggled after a visible character).
//   - override-instructions: "ignore/disregard/forget/override (all)
//     (previous/prior/above/system) instructions/prompts/rules".
//   - role-hijack: "you are now the system/admin/DAN…", "new instructions:",
//     "act as the system",
//     <IMPORTANT>/<system>/<instructions> pseudo-tags.
//   - conceal-from-user: "do not tell the user", "without informing the user".
//   - hidden-tool-call: "before/after/instead of using this tool, call …",
//     "you must call the … tool".
//   - exfiltration: sending/including secrets (API keys, tokens, passwords,
//     SSH keys, .env, conversation, system prompt), reading well-known secret
//     files (~/.ssh, id_rsa, .aws/credentials, /etc/passwd), or a markdown
//     image whose URL carries a query (a data beacon).
//
// Matching runs on a normalised copy: zero-width characters and soft hyphens
// removed, lower-cased, whitespace collapsed, so "ig\u200bnore" still hits.

// Hit names the tripwire rule that fired.
type Hit struct {
	Rule string
}

type tripRule struct {
	name     string
	triggers []string // cheap prefilter: the rule runs only if one occurs
	re       *regexp.Regexp
}

var tripRules = []tripRule{
	{"override-instructions", []string{"ignore", "disregard", "forget", "override"},
		regexp.MustCompile(`\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+|of\s+|my\s+)*(previous|prior|above|earlier|preceding|system|original|other)?\s*(instructions?|prompts?|rules|directions|guidelines)\b`)},
	{"role-hijack", []string{"you are now", "instructions", "act as", "<"},
		regexp.MustCompile(`\byou are now (a |an |the |in )?(system|admin|administrator|developer|root|dan|jailbroken|unrestricted|god mode|developer mode)\b|\bnew (system )?instructions?\s*:|\bact as (the |an? )?(system|administrator|developer|root)\b|<\s*/?\s*(important|system|instructions?)\s*>`)},
	{"conceal-from-user", []string{"user"},
		regexp.MustCompile(`\b(do not|don't|never)\s+(tell|inform|mention|reveal|show|notify)\s+(this\s+|it\s+)?(to\s+)?the user\b|\bwithout (telling|informing|asking|notifying) the user\b`)},
	{"hidden-tool-call", []string{"call", "invoke"},
		regexp.MustCompile(`\b(before|after|instead of)\s+(using|calling|running)\s+this tool\b[^.]{0,80}\b(call|invoke)\b|\byou must (first\s+)?(call|invoke)\s+(the\s+)?\S+\s+(tool|function)\b`)},
	{"exfiltration", []string{"send", "post", "upload", "forward", "include", "append", "email", "leak", "ssh", "id_rsa", "credentials", "passwd", "![", "reveal", "print", "repeat"},
		regexp.MustCompile(`\b(send|post|upload|forward|include|append|email|leak|transmit)\b[^.]{0,60}\b(api[ _-]?keys?|passwords?|secrets?|credentials|access tokens?|bearer tokens?|private keys?|ssh keys?|\.env\b|conversation history|chat history|system prompt)|~/\.ssh|\bid_rsa\b|\.aws/credentials|/etc/(passwd|shadow)\b|!\[[^\]]*\]\(\s*https?://[^)\s]*\?[^)\s]*=|\b(reveal|print|repeat|output)\s+(your|the)\s+(system prompt|hidden instructions|initial instructions)\b`)},
}

// Scan runs the tripwire over one text.
func Scan(text string) (Hit, bool) {
	if h, bad := invisible(text); bad {
		return h, true
	}
	norm := normalise(text)
	for i := range tripRules {
		r := &tripRules[i]
		if !anyContains(norm, r.triggers) {
			continue
		}
		if r.re.MatchString(norm) {
			return Hit{Rule: r.name}, true
		}
	}
	return Hit{}, false
}

// CheckDescription runs the tripwire over a tool description at list time.
// A hit is an *Error wrapping ErrInjection at the REGISTRY layer: the tool
// must not be offered.
func CheckDescription(description string) error {
	if h, hit := Scan(description); hit {
		return &Error{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY, Err: ErrInjection, Detail: "tool description: " + h.Rule}
	}
	return nil
}

func anyContains(s string, subs []string) bool {
	for _, t := range subs {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

func invisible(text string) (Hit, bool) {
	vs := 0
	for i, r := range text {
		switch {
		case r >= 0xE0000 && r <= 0xE007F,
			r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069,
			r == 0x200B, r == 0x2060, r == 0xFEFF && i > 0:
			return Hit{Rule: "invisible-unicode"}, true
		case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
			if vs++; vs >= 4 {
				return Hit{Rule: "invisible-unicode"}, true
			}
		default:
			vs = 0
		}
	}
	return Hit{}, false
}

// normalise lower-cases, drops zero-width characters and soft hyphens, and
// collapses whitespace runs to one space.
func normalise(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	space := false
	for _, r := range text {
		switch {
		case r == 0x200B || r == 0x200C || r == 0x200D || r == 0x2060 || r == 0xFEFF || r == 0x00AD:
			continue
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0xA0:
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		case r == utf8.RuneError:
			continue
		}
		space = false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
