package bench

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plot draws the report's PNGs into dir and returns their file names:
// throughput vs batch size, the latency distribution of the half-rate run,
// throughput vs settled identities.
func (r *Report) plot(dir string) ([]string, error) {
	var out []string
	save := func(file string, p *plot.Plot, err error) error {
		if err != nil {
			return err
		}
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, file)); err != nil {
			return err
		}
		out = append(out, file)
		return nil
	}
	if len(r.Sweep) > 0 {
		p, err := linePlot("core-only throughput vs batch size", "records per transaction", "records/s", r.Sweep, true)
		if err := save("bench-batch-size.png", p, err); err != nil {
			return out, err
		}
	}
	if len(r.Growth) > 0 {
		p, err := linePlot("core-only throughput vs settled identities", "identities settled", "records/s", r.Growth, false)
		if err := save("bench-growth.png", p, err); err != nil {
			return out, err
		}
	}
	if len(r.Scale) > 0 {
		p, err := scalePlot(r.Scale)
		if err := save("bench-scale.png", p, err); err != nil {
			return out, err
		}
	}
	if r.HalfRate != nil && r.HalfRate.Latency != nil && len(r.HalfRate.Latency.Histogram) > 0 {
		p, err := latencyPlot(r.HalfRate.Latency)
		if err := save("bench-latency.png", p, err); err != nil {
			return out, err
		}
	}
	return out, nil
}

// linePlot draws one series of points, x on a log scale if logX.
func linePlot(title, x, y string, pts []Point, logX bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	xy := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xy[i].X, xy[i].Y = pt.X, pt.RecordsPerSec
	}
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Min = 0
	if err := plotutil.AddLinePoints(p, "", xy); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	return p, nil
}

// scalePlot draws the scale grid's rate against partitions, one line per
// number of service instances.
func scalePlot(pts []ScalePoint) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "end-to-end throughput vs partitions and service instances"
	p.X.Label.Text, p.Y.Label.Text = "partitions of the usage topic", "records/s"
	var series []any
	for _, n := range distinctInstances(pts) {
		var xy plotter.XYs
		for _, pt := range pts {
			if pt.Instances == n {
				xy = append(xy, plotter.XY{X: float64(pt.Partitions), Y: pt.RecordsPerSec})
			}
		}
		series = append(series, fmt.Sprintf("%d instance(s)", n), xy)
	}
	p.Y.Min = 0
	if err := plotutil.AddLinePoints(p, series...); err != nil {
		return nil, err
	}
	p.Legend.Left = true
	return p, nil
}

// latencyPlot draws the histogram of latencies with its p50 and p99 marked.
func latencyPlot(l *Latency) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "end-to-end latency at half rate (record timestamp → settlement consumed)"
	p.X.Label.Text, p.Y.Label.Text = "latency (ms)", "settlements"
	h := make(plotter.XYs, len(l.Histogram))
	for i, n := range l.Histogram {
		h[i].X, h[i].Y = float64(i)*l.BucketMs+l.BucketMs/2, float64(n)
	}
	hist, err := plotter.NewHistogram(h, len(h))
	if err != nil {
		return nil, err
	}
	p.Add(hist)
	for _, q := range []struct {
		name string
		v    float64
	}{{"p50", l.P50ms}, {"p99", l.P99ms}} {
		ln, err := plotter.NewLine(plotter.XYs{{X: q.v, Y: 0}, {X: q.v, Y: float64(maxInt(l.Histogram))}})
		if err != nil {
			return nil, err
		}
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ln)
		p.Legend.Add(q.name, ln)
	}
	return p, nil
}

// distinctInstances lists the instance counts of the scale grid, in order.
func distinctInstances(pts []ScalePoint) []int {
	var out []int
	seen := map[int]bool{}
	for _, p := range pts {
		if !seen[p.Instances] {
			seen[p.Instances] = true
			out = append(out, p.Instances)
		}
	}
	return out
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
