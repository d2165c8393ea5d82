package analyze

import (
	"fmt"
	"html"
	"io"
)

// WriteSVG draws the completion funnel (records, listed, called) and the
// latency bands of the successful calls as one self-contained SVG, titled
// with Label so the chart is never read as availability.
func WriteSVG(w io.Writer, r *Result) error {
	type bar struct {
		label string
		n     int
	}
	funnel := []bar{{"records", r.Records}, {"listed", r.Listed.N}, {"called", r.Called.N}}
	var bands []bar
	for _, b := range r.Bands {
		bands = append(bands, bar{b.Label, b.Calls})
	}
	const width, rowH, left = 640, 22, 130
	height := 60 + rowH*(len(funnel)+len(bands)) + 40
	if _, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height); err != nil {
		return err
	}
	fmt.Fprintf(w, "<title>%s</title>\n", html.EscapeString(Label))
	fmt.Fprintf(w, `<text x="8" y="18" font-weight="bold">Probe completion funnel (%d records)</text>`+"\n", r.Records)
	fmt.Fprintf(w, `<text x="8" y="34" font-size="10">%s</text>`+"\n", html.EscapeString(Label))
	y := 48
	draw := func(bars []bar, total int) {
		for _, b := range bars {
			wpx := 0
			if total > 0 {
				wpx = b.n * (width - left - 60) / total
			}
			fmt.Fprintf(w, `<text x="8" y="%d">%s</text><rect x="%d" y="%d" width="%d" height="%d" fill="#4a7"/><text x="%d" y="%d">%d</text>`+"\n",
				y+14, html.EscapeString(b.label), left, y+2, wpx, rowH-6, left+wpx+4, y+14, b.n)
			y += rowH
		}
	}
	draw(funnel, r.Records)
	y += 10
	fmt.Fprintf(w, `<text x="8" y="%d" font-weight="bold">Successful calls by latency (%d)</text>`+"\n", y+10, r.Call.N)
	y += 16
	draw(bands, r.Call.N)
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}
