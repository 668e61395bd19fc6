//go:build !linux

package main

// releaseMappedPages does nothing where there is no /proc/self/smaps.
func releaseMappedPages(string) (int64, error) { return 0, nil }

// wakeMappedPages does nothing where releaseMappedPages does nothing.
func wakeMappedPages() error { return nil }
