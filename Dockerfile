# The hf-node image, from scratch: nothing but the static binaries. Its
# build context is laid out by `make image-context` (the binaries are built
# with the local Go toolchain, CGO_ENABLED=0, version stamped, so no image is
# pulled to build them); `make image` builds it:
#   make image IMAGE=hf-node:v1
#   docker network create hf
#   docker run -d --name hf1 --network hf hf-node:v1
#   docker exec hf1 hf-cli cluster join-token        # prints the join command
#   docker run -d --name hf2 --network hf hf-node:v1 --join ... --join-token ...
# A container runs the test driver (and docker, if given the engine's socket);
# the native driver needs the host itself. The data dir is a volume.
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin \
    HF_DATA_DIR=/var/lib/hf \
    HF_API_ADDRESS=0.0.0.0:7700 \
    HF_CLUSTER_BIND=0.0.0.0:7701
VOLUME /var/lib/hf
EXPOSE 7700/tcp 7701/tcp 7701/udp
ENTRYPOINT ["/usr/local/bin/hf-node"]
