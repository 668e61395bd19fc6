package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// imageCache remembers which image each loaded tarball became, so a tarball
// is loaded once however many containers use it. It is keyed by the tarball's
// sum: the same bytes are the same image whatever URL they came from.
type imageCache struct {
	mu  sync.Mutex
	ids map[string]string // sum -> image id
	// busy holds a one-slot channel per sum being resolved, so concurrent
	// allocations of one tarball wait for a single download and load.
	busy map[string]chan struct{}
}

// lock takes the slot for sum, or returns ctx's error.
func (c *imageCache) lock(ctx context.Context, sum string) error {
	c.mu.Lock()
	if c.busy == nil {
		c.busy = map[string]chan struct{}{}
		c.ids = map[string]string{}
	}
	ch, ok := c.busy[sum]
	if !ok {
		ch = make(chan struct{}, 1)
		c.busy[sum] = ch
	}
	c.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *imageCache) unlock(sum string) {
	c.mu.Lock()
	ch := c.busy[sum]
	c.mu.Unlock()
	<-ch
}

func (c *imageCache) get(sum string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[sum]
}

func (c *imageCache) put(sum, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		delete(c.ids, sum)
		return
	}
	c.ids[sum] = id
}

// resolveImage returns the id of the template's image on the engine: a tag
// must already be there; a tarball is downloaded (once, through the fetch
// cache) and loaded (once per driver, or again when the image was removed).
func (d *Driver) resolveImage(ctx context.Context, st snapshot, ref ImageRef) (string, error) {
	if ref.Tag != "" {
		img, err := st.cli.ImageInspect(ctx, ref.Tag)
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("image %s: %w (tags are never pulled; load it first): %w", ref.Tag, ErrImageNotFound, err)
		}
		if err != nil {
			return "", fmt.Errorf("image %s: %w", ref.Tag, err)
		}
		return img.ID, nil
	}
	if err := d.images.lock(ctx, ref.Sum); err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	defer d.images.unlock(ref.Sum)
	if id := d.images.get(ref.Sum); id != "" {
		_, err := st.cli.ImageInspect(ctx, id)
		if err == nil {
			return id, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("image %s: %w", ref, err)
		}
		d.images.put(ref.Sum, "") // removed from the engine since: load again
	}
	path, err := st.fetcher.Get(ctx, ref.URL, ref.Sum)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	id, err := d.loadImage(ctx, st.cli, path)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	d.images.put(ref.Sum, id)
	d.log.Info("docker image loaded", "url", ref.String(), "sum", ref.Sum, "image", id)
	return id, nil
}

// loadImage loads a `docker save` tarball and returns the image id.
func (d *Driver) loadImage(ctx context.Context, cli *client.Client, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("load: %w", err)
	}
	defer f.Close()
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return "", fmt.Errorf("load: %w", err)
	}
	defer resp.Body.Close()
	d.loads.Add(1)
	loaded, err := parseLoadStream(resp.Body)
	if err != nil {
		return "", fmt.Errorf("load: %w", err)
	}
	if id, ok := strings.CutPrefix(loaded, "ID: "); ok {
		return id, nil
	}
	// The tarball named a tag: the engine reports the tag, not the id.
	img, err := cli.ImageInspect(ctx, loaded)
	if err != nil {
		return "", fmt.Errorf("load: loaded %s: %w", loaded, err)
	}
	return img.ID, nil
}

// loadMessage is one message of the engine's `docker load` stream.
type loadMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// parseLoadStream reads the JSON messages of an image load and returns what
// the first "Loaded image" line names: "ID: sha256:..." for an untagged image,
// else the first tag. An error message from the engine becomes the error.
func parseLoadStream(r io.Reader) (string, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var loaded string
	for {
		var m loadMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read engine answer: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return "", errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return "", errors.New(m.Error)
		}
		line := strings.TrimSpace(m.Stream)
		if rest, ok := strings.CutPrefix(line, "Loaded image "); ok && loaded == "" {
			loaded = rest // "ID: sha256:..."
		} else if rest, ok := strings.CutPrefix(line, "Loaded image: "); ok && loaded == "" {
			loaded = rest
		}
	}
	if loaded == "" {
		return "", errors.New("the engine loaded no image (is it a `docker save` tarball?)")
	}
	return loaded, nil
}
