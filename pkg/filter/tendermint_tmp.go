package filter

import "strings"

// CheckTendermint: placeholder until the dialect check lands.
func CheckTendermint(src string) error {
	if strings.TrimSpace(src) == "" {
		return &SyntaxError{Offset: len(src), Msg: "EOF"}
	}
	for _, kw := range []string{" OR ", "NOT ", "(", " MATCHES "} {
		if i := strings.Index(src, kw); i >= 0 {
			if kw[0] == ' ' {
				i++
			}
			return &SyntaxError{Offset: i, Msg: strings.TrimSpace(kw) + " is an evtctl extension"}
		}
	}
	_, err := Compile(src)
	return err
}
