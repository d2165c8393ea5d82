package artifact

import "strings"

// CleanName turns s into one segment-safe part of a metadata.name: the
// characters ValidateName refuses become '-', runs of '/' and '.' are
// folded, and leading and trailing '/' are dropped; "" becomes "-".
func CleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@:+-/", r) {
			return r
		}
		return '-'
	}, s)
	for strings.Contains(s, "//") || strings.Contains(s, "..") {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "//", "/"), "..", ".")
	}
	s = strings.Trim(s, "/")
	if s == "" {
		s = "-"
	}
	return s
}
