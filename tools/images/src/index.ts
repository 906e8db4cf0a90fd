/** @kvt/images: Builds the local container-disk images from Debian packages: local/demo-linux (kernel + busybox initramfs with NoCloud) and local/test-guest. */
export {};
