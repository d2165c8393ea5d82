package validate

import (
	"strings"
	"unicode"
	"unicode/utf8"
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

// Scan runs the tripwire over one text: one pass over its normalised words,
// each rule anchored at the word that starts it, so the cost is linear in
// the text (a result can be megabytes) with no regular expressions.
func Scan(text string) (Hit, bool) {
	s := text
	if !normalASCII(text) {
		if h, bad := invisible(text); bad {
			return h, true
		}
		s = normalise(text)
	}
	var buf [8]string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] != ' ' {
			j++
		}
		if rule := atWord(s, i, j, &buf); rule != "" {
			return Hit{Rule: rule}, true
		}
		i = j + 1
	}
	return Hit{}, false
}

// atWord checks the rules that start at the word s[start:end].
func atWord(s string, start, end int, buf *[8]string) string {
	tok := s[start:end]
	w := trimPunct(tok)
	switch w {
	case "ignore", "disregard", "forget", "override":
		if overrideInstructions(words(s, end, buf)) {
			return "override-instructions"
		}
	case "you":
		ws := words(s, end, buf)
		if len(ws) >= 2 && ws[0] == "are" && ws[1] == "now" && isRole(ws[2:]) {
			return "role-hijack"
		}
		if len(ws) >= 1 && ws[0] == "must" && mustCall(ws[1:]) {
			return "hidden-tool-call"
		}
	case "act":
		if ws := words(s, end, buf); len(ws) >= 1 && ws[0] == "as" && isRole(ws[1:]) {
			return "role-hijack"
		}
	case "new":
		rest := s[end:min(len(s), end+32)]
		for _, p := range []string{" instructions:", " instruction:", " system instructions:", " system instruction:"} {
			if strings.HasPrefix(rest, p) {
				return "role-hijack"
			}
		}
	case "user":
		if concealFromUser(s[max(0, start-40):start]) {
			return "conceal-from-user"
		}
	case "tool":
		if beforeThisTool(s[max(0, start-40):start]) {
			rest := clause(s, end, 80)
			if containsWord(rest, "call") || containsWord(rest, "invoke") {
				return "hidden-tool-call"
			}
		}
	case "send", "post", "upload", "forward", "include", "append", "email", "leak", "transmit":
		if mentionsSecret(s[end:min(len(s), end+64)]) {
			return "exfiltration"
		}
	case "reveal", "print", "repeat", "output":
		ws := words(s, end, buf)
		if len(ws) >= 3 && oneOf(ws[0], "your", "the") &&
			((ws[1] == "system" && ws[2] == "prompt") || (oneOf(ws[1], "hidden", "initial") && ws[2] == "instructions")) {
			return "exfiltration"
		}
	}
	if strings.IndexByte(tok, '<') >= 0 {
		for _, t := range pseudoTags {
			if strings.Contains(tok, t) {
				return "role-hijack"
			}
		}
	}
	if strings.IndexByte(tok, '/') >= 0 || strings.IndexByte(tok, '_') >= 0 {
		for _, p := range secretPaths {
			if strings.Contains(tok, p) {
				return "exfiltration"
			}
		}
	}
	if k := strings.Index(tok, "!["); k >= 0 && imageBeacon(s[start+k:]) {
		return "exfiltration"
	}
	return ""
}

// trimPunct trims surrounding ASCII punctuation (not '<', '/', '~', '_').
func trimPunct(w string) string {
	isP := func(c byte) bool { return strings.IndexByte(".,;:!?\"'()[]{}*`", c) >= 0 }
	for len(w) > 0 && isP(w[0]) {
		w = w[1:]
	}
	for len(w) > 0 && isP(w[len(w)-1]) {
		w = w[:len(w)-1]
	}
	return w
}

var (
	pseudoTags   = []string{"<important>", "</important>", "<system>", "</system>", "<instructions>", "</instructions>", "<instruction>"}
	secretPaths  = []string{"~/.ssh", "id_rsa", ".aws/credentials", "/etc/passwd", "/etc/shadow"}
	hijackRoles  = []string{"system", "admin", "administrator", "developer", "root", "dan", "jailbroken", "unrestricted", "god", "superuser"}
	exfilSecrets = []string{"api key", "api_key", "api-key", "apikey", "password", "secret", "credentials", "access token",
		"bearer token", "private key", "ssh key", ".env", "conversation history", "chat history", "system prompt"}
)

// words returns up to len(buf) words of s after i, trimmed of punctuation;
// a sentence end ('.', '!', '?', ';') stops it. No allocation.
func words(s string, i int, buf *[8]string) []string {
	out := buf[:0]
	for i < len(s) && len(out) < len(buf) {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		j := i
		for j < len(s) && s[j] != ' ' {
			j++
		}
		raw := s[i:j]
		if w := trimPunct(raw); w != "" {
			out = append(out, w)
		}
		if strings.ContainsAny(raw, ".!?;") && !strings.HasPrefix(raw, ".") {
			break
		}
		i = j
	}
	return out
}

func oneOf(w string, set ...string) bool {
	for _, x := range set {
		if w == x {
			return true
		}
	}
	return false
}

// overrideInstructions: [all|any|the|your|previous|prior|…]* then
// instructions/prompts/rules/directions/guidelines.
func overrideInstructions(ws []string) bool {
	for _, w := range ws {
		switch {
		case oneOf(w, "instruction", "instructions", "prompt", "prompts", "rules", "directions", "guidelines"):
			return true
		case !oneOf(w, "all", "any", "the", "your", "of", "my", "previous", "prior", "above", "earlier",
			"preceding", "system", "original", "other"):
			return false
		}
	}
	return false
}

// isRole: [a|an|the|in] system/admin/DAN/….
func isRole(ws []string) bool {
	if len(ws) > 0 && oneOf(ws[0], "a", "an", "the", "in") {
		ws = ws[1:]
	}
	return len(ws) > 0 && oneOf(ws[0], hijackRoles...)
}

// mustCall: (after "you must") [first] call|invoke [the] X tool|function.
func mustCall(ws []string) bool {
	if len(ws) > 0 && ws[0] == "first" {
		ws = ws[1:]
	}
	if len(ws) < 3 || !oneOf(ws[0], "call", "invoke") {
		return false
	}
	ws = ws[1:]
	if ws[0] == "the" {
		ws = ws[1:]
	}
	return len(ws) >= 2 && oneOf(ws[1], "tool", "function")
}

// concealFromUser: the text before "user" ends "do not|don't|never
// tell|inform|mention|reveal|show|notify [this|it] [to] the" or "without
// telling|informing|asking|notifying the".
func concealFromUser(pre string) bool {
	var buf [6]string
	ws := lastWords(pre, &buf) // reversed: ws[0] is the word before "user"
	if len(ws) < 2 || ws[0] != "the" {
		return false
	}
	ws = ws[1:]
	if oneOf(ws[0], "telling", "informing", "asking", "notifying") {
		return len(ws) > 1 && ws[1] == "without"
	}
	if ws[0] == "to" {
		ws = ws[1:]
	}
	if len(ws) > 0 && oneOf(ws[0], "this", "it") {
		ws = ws[1:]
	}
	if len(ws) < 2 || !oneOf(ws[0], "tell", "inform", "mention", "reveal", "show", "notify") {
		return false
	}
	return oneOf(ws[1], "don't", "never") || (ws[1] == "not" && len(ws) > 2 && ws[2] == "do")
}

// lastWords returns the words at the end of pre, last first, up to len(buf).
func lastWords(pre string, buf *[6]string) []string {
	out := buf[:0]
	for j := len(pre); j > 0 && len(out) < len(buf); {
		for j > 0 && pre[j-1] == ' ' {
			j--
		}
		i := j
		for i > 0 && pre[i-1] != ' ' {
			i--
		}
		if i == 0 && len(pre) >= 40 {
			break // may be a cut word
		}
		if w := trimPunct(pre[i:j]); w != "" {
			out = append(out, w)
		}
		j = i
	}
	return out
}

// beforeThisTool: the text before "tool" ends "before|after|instead of
// using|calling|running this".
func beforeThisTool(pre string) bool {
	pre = strings.TrimRight(pre, " ")
	if !strings.HasSuffix(pre, " this") {
		return false
	}
	var buf [6]string
	ws := lastWords(pre, &buf) // "this", verb, lead…
	if len(ws) < 3 || ws[0] != "this" || !oneOf(ws[1], "using", "calling", "running") {
		return false
	}
	return oneOf(ws[2], "before", "after") || (ws[2] == "of" && len(ws) > 3 && ws[3] == "instead")
}

// mentionsSecret: the clause after an exfiltration verb names a secret.
func mentionsSecret(rest string) bool {
	if k := strings.IndexAny(rest, "!?;"); k >= 0 {
		rest = rest[:k]
	}
	// A '.' ends the clause unless it starts ".env".
	for k := 0; k < len(rest); k++ {
		if rest[k] == '.' && !strings.HasPrefix(rest[k:], ".env") {
			rest = rest[:k]
			break
		}
	}
	for _, sec := range exfilSecrets {
		if mentions(rest, sec) {
			return true
		}
	}
	return false
}

// clause is the text after i up to the end of its sentence, at most n bytes.
func clause(s string, i, n int) string {
	end := min(len(s), i+n)
	if k := strings.IndexAny(s[i:end], ".!?;"); k >= 0 {
		end = i + k
	}
	return s[i:end]
}

func isWordByte(c byte) bool {
	return c == '_' || c == '\'' || c >= 0x80 || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')
}

// mentions reports whether s contains term as whole words, allowing a
// plural "s" ("passwords" yes, "secretary" no).
func mentions(s, term string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], term)
		if i < 0 {
			return false
		}
		start, end := off+i, off+i+len(term)
		off = start + 1
		if start > 0 && isWordByte(s[start-1]) && isWordByte(term[0]) {
			continue
		}
		if end < len(s) && s[end] == 's' {
			end++
		}
		if end == len(s) || !isWordByte(s[end]) {
			return true
		}
	}
}

// containsWord reports whether s contains word as a whole word.
func containsWord(s, word string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], word)
		if i < 0 {
			return false
		}
		start, end := off+i, off+i+len(word)
		off = start + 1
		if (start == 0 || !isWordByte(s[start-1])) && (end == len(s) || !isWordByte(s[end])) {
			return true
		}
	}
}

// imageBeacon: s starts a markdown image ![alt](http(s)://…?k=v) whose URL
// carries data out in its query.
func imageBeacon(s string) bool {
	j := strings.Index(s, "](")
	if j < 0 || strings.Contains(s[2:j], "]") {
		return false
	}
	url := strings.TrimLeft(s[j+2:], " ")
	if k := strings.IndexAny(url, ") "); k >= 0 {
		url = url[:k]
	}
	q := strings.IndexByte(url, '?')
	return (strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) && q >= 0 && strings.IndexByte(url[q:], '=') >= 0
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

// normalASCII reports whether text is already its normalised form and
// holds no invisible character: ASCII with no upper-case letter, no
// whitespace but single spaces. Then normalise(text) == text and
// invisible(text) finds nothing (every rule it checks is above U+007F), so
// Scan skips both and copies nothing: the common case of short keys,
// values and JSON text.
func normalASCII(text string) bool {
	space := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == ' ':
			if space {
				return false
			}
			space = true
			continue
		case c >= utf8.RuneSelf, 'A' <= c && c <= 'Z', c == '\t', c == '\n', c == '\r', c == '\v', c == '\f':
			return false
		}
		space = false
	}
	return true
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
		if r < utf8.RuneSelf {
			c := byte(r)
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
