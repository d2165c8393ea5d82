package probe

import (
	"context"
	"sync"
)

// Target is one endpoint of RunAll with its own options.
type Target struct {
	URL     string
	Options Options
}

// RunAll probes every target with at most concurrency funnels in flight
// (zero or less: 16) and returns the reports in the order of targets. A URL
// that cannot be probed at all gives a nil report and its error at the same
// index; targets not started when ctx ends get ctx's error; every other
// outcome is in the report.
func RunAll(ctx context.Context, targets []Target, concurrency int) ([]*Report, []error) {
	if concurrency <= 0 {
		concurrency = 16
	}
	reports, errs := make([]*Report, len(targets)), make([]error, len(targets))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		if ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil {
			for j := i; j < len(targets); j++ {
				errs[j] = err
			}
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			reports[i], errs[i] = Run(ctx, t.URL, t.Options)
		}()
	}
	wg.Wait()
	return reports, errs
}
