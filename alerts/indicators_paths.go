package alerts

import (
	"regexp"
	"strings"
)

// The shapes of file paths, and of DOMAIN\user, which must not be read
// inside a Windows path.
var (
	reWinQuoted = regexp.MustCompile(`(?i)["']((?:[a-z]:\\|\\\\[a-z0-9._$\-]+\\|%[a-z_]+%\\)[^"'\r\n]*)["']`)
	reWinPath   = regexp.MustCompile(`(?i)(?:\b[a-z]:\\|\\\\[a-z0-9._$\-]+\\|%[a-z_]+%\\)[^\s"'<>|*?\x60` + cjkPunct + `]*`)
	rePosixPath = regexp.MustCompile(`(?:^|[\s"'=(,\[])((?:~|\.{1,2})?/(?:[A-Za-z0-9._+~@%\-]+/)+[A-Za-z0-9._+~@%\-]*)`)
	reDomUser   = regexp.MustCompile(`(?:^|[\s"'=(,])([A-Za-z][A-Za-z0-9.\-]{0,62}\\[A-Za-z0-9._$\-]{1,64})(?:$|[\s"',;)])`)
)

// scanPaths reports file paths: the whole value t when it is one, else the
// paths written inside s outside the masked spans. It returns the spans of
// the paths it found.
func scanPaths(c *collector, s, t string, tidy func(lo, hi int) (int, int), masked spans) spans {
	if !strings.ContainsAny(s, `/\%`) {
		return nil
	}
	if wholePath(t) {
		c.add(KindFilePath, t)
		return spans{{0, len(s)}}
	}
	var found spans
	if strings.Contains(s, `\`) {
		for _, loc := range reWinQuoted.FindAllStringSubmatchIndex(s, -1) {
			c.add(KindFilePath, s[loc[2]:loc[3]])
			found = append(found, [2]int{loc[0], loc[1]})
		}
		for _, loc := range reWinPath.FindAllStringIndex(s, -1) {
			if !found.covers(loc[0], loc[1]) {
				lo, hi := tidy(loc[0], loc[1])
				c.add(KindFilePath, s[lo:hi])
				found = append(found, [2]int{lo, hi})
			}
		}
	}
	if strings.Contains(s, "/") {
		for _, loc := range rePosixPath.FindAllStringSubmatchIndex(s, -1) {
			if !masked.covers(loc[2], loc[3]) && !found.covers(loc[2], loc[3]) {
				lo, hi := tidy(loc[2], loc[3])
				c.add(KindFilePath, s[lo:hi])
				found = append(found, [2]int{lo, hi})
			}
		}
	}
	return found
}

// wholePath says a whole (trimmed) value is one file path: it starts like a
// Windows or POSIX path, is one line without a URL, and its last segment has
// no white space (else it is a command with arguments).
func wholePath(t string) bool {
	if len(t) < 3 || strings.ContainsAny(t, "\r\n\t") || strings.Contains(t, "://") {
		return false
	}
	lower := strings.ToLower(t)
	posix := (t[0] == '/' && t[1] != '/' || strings.HasPrefix(t, "~/")) && strings.Count(t, "/") >= 2 && !strings.HasPrefix(lower, "/subscriptions/")
	windows := len(t) > 3 && isLetter(t[0]) && t[1] == ':' && t[2] == '\\' || strings.HasPrefix(t, `\\`) && len(t) > 3 && t[2] != '\\'
	if !posix && !windows {
		return false
	}
	last := t[strings.LastIndexAny(t, `/\`)+1:]
	return !strings.ContainsAny(last, " ")
}
