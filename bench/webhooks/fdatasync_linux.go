package main

import (
	"errors"
	"os"
	"syscall"
)

func fdatasyncFile(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
