package decide

// match reports whether name matches pattern, where '*' matches any run of
// characters (including '/', since server names contain it) and every other
// byte matches itself. Used for inventory, side-effect, approval, principal
// and class-member patterns.
func match(pattern, name string) bool {
	// Iterative wildcard match with single backtrack point: linear in
	// practice, never recursive.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchAny reports whether any pattern matches name.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if match(p, name) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Match is the policy pattern match (see docs/reference.md, "Patterns and
// names"), for other consumers of policy patterns on the agent.
func Match(pattern, name string) bool { return match(pattern, name) }
