package analyze

import (
	"fmt"
	"html"
	"io"
)

// Bar is one bar of a Chart.
type Bar struct {
	Label string `json:"label"`
	N     int    `json:"n"`
}

// Section is a group of bars scaled to Total, under an optional heading.
type Section struct {
	Heading string `json:"heading,omitempty"`
	Total   int    `json:"total"`
	Bars    []Bar  `json:"bars"`
}

// Chart is a self-contained horizontal bar chart: a title, a note saying
// what the figures are (and are not), and sections of bars.
type Chart struct {
	Title, Note string
	Sections    []Section
}

// WriteSVG draws c as one self-contained SVG (no scripts, no external
// references), labelled for assistive technology by its title and note.
func (c Chart) WriteSVG(w io.Writer) error {
	const width, rowH, left = 640, 22, 130
	height := 74 + 26*max(len(c.Sections)-1, 0)
	for _, s := range c.Sections {
		height += rowH * len(s.Bars)
	}
	if _, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %[1]d %[2]d" role="img" font-family="sans-serif" font-size="12">`+"\n", width, height); err != nil {
		return err
	}
	fmt.Fprintf(w, "<title>%s: %s</title>\n", html.EscapeString(c.Title), html.EscapeString(c.Note))
	fmt.Fprintf(w, `<text x="8" y="18" font-weight="bold">%s</text>`+"\n", html.EscapeString(c.Title))
	fmt.Fprintf(w, `<text x="8" y="34" font-size="10">%s</text>`+"\n", html.EscapeString(c.Note))
	y := 48
	for i, s := range c.Sections {
		if i > 0 {
			y += 10
		}
		if s.Heading != "" {
			fmt.Fprintf(w, `<text x="8" y="%d" font-weight="bold">%s</text>`+"\n", y+10, html.EscapeString(s.Heading))
			y += 16
		}
		for _, b := range s.Bars {
			wpx := 0
			if s.Total > 0 {
				wpx = b.N * (width - left - 60) / s.Total
			}
			fmt.Fprintf(w, `<text x="8" y="%d">%s</text><rect x="%d" y="%d" width="%d" height="%d" fill="#2f6f4f"/><text x="%d" y="%d">%d</text>`+"\n",
				y+14, html.EscapeString(b.Label), left, y+2, wpx, rowH-6, left+wpx+4, y+14, b.N)
			y += rowH
		}
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

// WriteSVG draws the completion funnel (records, listed, called) and the
// latency bands of the successful calls as one self-contained SVG, titled
// with Label so the chart is never read as availability.
func WriteSVG(w io.Writer, r *Result) error {
	bands := Section{Heading: fmt.Sprintf("Successful calls by latency (%d)", r.Call.N), Total: r.Call.N}
	for _, b := range r.Bands {
		bands.Bars = append(bands.Bars, Bar{b.Label, b.Calls})
	}
	return Chart{Title: fmt.Sprintf("Probe completion funnel (%d records)", r.Records), Note: Label, Sections: []Section{
		{Total: r.Records, Bars: []Bar{{"records", r.Records}, {"listed", r.Listed.N}, {"called", r.Called.N}}},
		bands,
	}}.WriteSVG(w)
}
