//go:build !unix

package decide

import "time"

func processCPU() time.Duration { return 0 }
