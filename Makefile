# Release build of hf: static binaries that say which build they are.
#   make build            bin/hf-node, bin/hf-cli, bin/hf-driver-cloud for this host
#   make release          dist/hf_VERSION_OS_ARCH.tar.gz (+ .sha256) for GOOS/GOARCH
#   make image            the hf-node container image (Dockerfile, FROM scratch)
# VERSION defaults to `git describe`; override with make VERSION=v1.2.3.

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME ?= $(shell git log -1 --format=%cI 2>/dev/null)
GOOS     ?= $(shell go env GOOS)
GOARCH   ?= $(shell go env GOARCH)
IMAGE    ?= hf-node:$(VERSION)
BIN      ?= bin
IMAGE_CONTEXT ?= build/image
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt

STAMP    := -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.commitTime=$(COMMIT_TIME)
GOBUILD  := CGO_ENABLED=0 GOOS=$(GOOS) GOARCH=$(GOARCH) go build -trimpath -ldflags "-s -w $(STAMP)"
DIST     := dist/hf_$(VERSION)_$(GOOS)_$(GOARCH)

.PHONY: build release image-context image clean

build:
	$(GOBUILD) -o $(BIN)/hf-node ./cmd/hf-node
	$(GOBUILD) -o $(BIN)/hf-cli ./cmd/hf-cli
	$(GOBUILD) -o $(BIN)/hf-driver-cloud ./cmd/hf-driver-cloud

release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(GOBUILD) -o $(DIST)/hf-node ./cmd/hf-node
	$(GOBUILD) -o $(DIST)/hf-cli ./cmd/hf-cli
	$(GOBUILD) -o $(DIST)/hf-driver-cloud ./cmd/hf-driver-cloud
	cp LICENSE README.md config.example.yml packaging/systemd/hf-node.service $(DIST)/
	tar -C dist -czf $(DIST).tar.gz $(notdir $(DIST))
	cd dist && sha256sum $(notdir $(DIST)).tar.gz > $(notdir $(DIST)).tar.gz.sha256

# The image's build context: the static binaries and the few files a scratch
# image needs (a /tmp, CA certificates for the cloud drivers' APIs). Nothing
# is pulled: the binaries are built here with the local Go toolchain.
image-context:
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)/rootfs/usr/local/bin $(IMAGE_CONTEXT)/rootfs/tmp $(IMAGE_CONTEXT)/rootfs/etc/ssl/certs
	chmod 1777 $(IMAGE_CONTEXT)/rootfs/tmp
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w $(STAMP)" -o $(IMAGE_CONTEXT)/rootfs/usr/local/bin/hf-node ./cmd/hf-node
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w $(STAMP)" -o $(IMAGE_CONTEXT)/rootfs/usr/local/bin/hf-cli ./cmd/hf-cli
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w $(STAMP)" -o $(IMAGE_CONTEXT)/rootfs/usr/local/bin/hf-driver-cloud ./cmd/hf-driver-cloud
	if [ -f $(CA_BUNDLE) ]; then cp $(CA_BUNDLE) $(IMAGE_CONTEXT)/rootfs/etc/ssl/certs/ca-certificates.crt; fi
	cp Dockerfile $(IMAGE_CONTEXT)/

image: image-context
	docker build -t $(IMAGE) $(IMAGE_CONTEXT)

clean:
	rm -rf $(BIN) dist build
