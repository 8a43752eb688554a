// Package plot writes simple line charts as standalone SVG files: axes with
// "nice" ticks, labelled gridlines, one polyline with point markers per
// series, and a legend. It has no dependencies and is meant for benchmark
// sweeps a person opens in a browser.
package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Series is one named line. X and Y have equal length; points with a NaN or
// infinite coordinate are left out.
type Series struct {
	Name string
	X, Y []float64
}

// Chart is a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Width and Height in pixels (default 720×440).
	Width, Height int
}

// palette holds the series colours (Okabe–Ito, readable by colour-blind
// viewers), reused cyclically.
var palette = [...]string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

// Layout margins in pixels.
const (
	marginLeft   = 80
	marginRight  = 30 // plus the legend's width: it sits right of the plot
	marginTop    = 50
	marginBottom = 60
)

// WriteSVG writes the chart as an SVG document.
func (c Chart) WriteSVG(w io.Writer) error {
	if len(c.Series) == 0 {
		return errors.New("plot: chart has no series")
	}
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot: series %q has %d x values and %d y values", s.Name, len(s.X), len(s.Y))
		}
	}
	width, height := c.Width, c.Height
	if width <= 0 {
		width = 720
	}
	if height <= 0 {
		height = 440
	}
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range c.Series {
		for i := range s.X {
			if !finite(s.X[i]) || !finite(s.Y[i]) {
				continue
			}
			xmin, xmax = min(xmin, s.X[i]), max(xmax, s.X[i])
			ymax = max(ymax, s.Y[i])
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax = 0, 1
	}
	if xmax == xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	xticks := niceTicks(xmin, xmax, 8)
	yticks := niceTicks(0, max(ymax, 1e-9), 6)
	x0, x1 := xticks[0], xticks[len(xticks)-1]
	y0, y1 := yticks[0], yticks[len(yticks)-1]
	lw := legendWidth(c.Series)
	right := marginRight + lw
	pw := float64(width - marginLeft - right)
	if pw < 100 {
		return fmt.Errorf("plot: width %d leaves no room for the plot", width)
	}
	ph := float64(height - marginTop - marginBottom)
	px := func(x float64) float64 { return marginLeft + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return marginTop + ph - (y-y0)/(y1-y0)*ph }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, width, height, width, height)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="16" text-anchor="middle" font-weight="bold">%s</text>`+"\n", width/2, marginTop/2+4, esc(c.Title))
	// Grid and ticks.
	b.WriteString(`<g class="grid" stroke="#dddddd" stroke-width="1">` + "\n")
	for _, t := range yticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", px(x0), py(t), px(x1), py(t))
	}
	for _, t := range xticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", px(t), py(y0), px(t), py(y1))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<g class="axes" stroke="black" stroke-width="1.5"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`+"\n",
		px(x0), py(y0), px(x1), py(y0), px(x0), py(y0), px(x0), py(y1))
	b.WriteString(`<g class="xticks" text-anchor="middle">` + "\n")
	for _, t := range xticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			px(t), py(y0), px(t), py(y0)+5, px(t), py(y0)+20, tickLabel(t))
	}
	b.WriteString("</g>\n" + `<g class="yticks" text-anchor="end">` + "\n")
	for _, t := range yticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			px(x0)-5, py(t), px(x0), py(t), px(x0)-8, py(t)+4, tickLabel(t))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="xlabel" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", marginLeft+pw/2, height-15, esc(c.XLabel))
	fmt.Fprintf(&b, `<text class="ylabel" transform="translate(18,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginTop+ph/2, esc(c.YLabel))
	// Series.
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		fmt.Fprintf(&b, `<g class="series" data-name="%s" stroke="%s" fill="%s">`+"\n", esc(s.Name), color, color)
		b.WriteString(`<polyline fill="none" stroke-width="2" points="`)
		first := true
		for j := range s.X {
			if !finite(s.X[j]) || !finite(s.Y[j]) {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			first = false
			fmt.Fprintf(&b, "%.1f,%.1f", px(s.X[j]), py(s.Y[j]))
		}
		b.WriteString(`"/>` + "\n")
		for j := range s.X {
			if finite(s.X[j]) && finite(s.Y[j]) {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3"><title>%s: (%s, %s)</title></circle>`+"\n",
					px(s.X[j]), py(s.Y[j]), esc(s.Name), tickLabel(s.X[j]), strconv.FormatFloat(s.Y[j], 'g', 6, 64))
			}
		}
		b.WriteString("</g>\n")
	}
	// Legend, right of the plot area.
	lx := width - right + 15
	fmt.Fprintf(&b, `<g class="legend"><rect x="%d" y="%d" width="%d" height="%d" fill="white" stroke="#999999"/>`+"\n",
		lx, marginTop, lw, 8+18*len(c.Series))
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		y := marginTop + 14 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
			lx+8, y-4, lx+30, y-4, color, lx+36, y, esc(s.Name))
	}
	b.WriteString("</g>\n</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// legendWidth estimates the legend box width from the longest name
// (capped, so long names cannot squeeze the plot away).
func legendWidth(series []Series) int {
	n := 0
	for _, s := range series {
		n = max(n, len(s.Name))
	}
	return min(44+7*n, 200)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// esc escapes text for XML.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceTicks returns evenly spaced round tick values covering [lo, hi] with
// about n intervals (Heckbert's "nice numbers").
func niceTicks(lo, hi float64, n int) []float64 {
	span := nice(hi-lo, false)
	step := nice(span/float64(n), true)
	start := math.Floor(lo/step) * step
	end := math.Ceil(hi/step) * step
	var ticks []float64
	for i := 0; ; i++ {
		t := start + float64(i)*step
		if t > end+step/2 || i > 1000 {
			break
		}
		// Snap away float noise such as 0.30000000000000004.
		ticks = append(ticks, math.Round(t/step)*step)
	}
	if len(ticks) < 2 {
		ticks = append(ticks, start+step)
	}
	return ticks
}

// nice returns a round number near x: 1, 2, 5 or 10 times a power of ten.
func nice(x float64, round bool) float64 {
	if x <= 0 || !finite(x) {
		return 1
	}
	exp := math.Floor(math.Log10(x))
	f := x / math.Pow(10, exp)
	var nf float64
	switch {
	case round && f < 1.5, !round && f <= 1:
		nf = 1
	case round && f < 3, !round && f <= 2:
		nf = 2
	case round && f < 7, !round && f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * math.Pow(10, exp)
}

// tickLabel formats a tick value compactly.
func tickLabel(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}
