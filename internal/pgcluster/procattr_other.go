//go:build !unix

package pgcluster

import (
	"errors"
	"syscall"
)

// sysProcAttr exists so the package compiles everywhere; Start refuses to
// run on these platforms before it is ever called.
func sysProcAttr(*runAs) *syscall.SysProcAttr { return nil }

// platformSupported keeps `settle` building on non-unix systems while saying
// plainly that the private cluster needs unix sockets and signals.
func platformSupported() error {
	return errors.New("pgcluster: private PostgreSQL clusters are only supported on Linux and other unix systems")
}
