# Shared by native/'s Makefiles: compile through ccache (Debian's `ccache`) when it is installed, so a fresh clone on
# a machine that built the same sources before (CI clones the project afresh each run) reuses the objects instead of
# compiling them again (about 4 minutes of CPU). Without ccache the commands are the plain compiler's.
#
# ccache caches one source file per invocation, so every Makefile here compiles each .cc to its own object and links
# them in a separate step. CCACHE_BASEDIR makes absolute paths under the project (the node-api headers in its
# node_modules) relative in the hash, and CCACHE_NOHASHDIR leaves the working directory out of it: clones in different
# directories then share entries (the objects' debug info names the first clone's directory; nothing reads it).
CCACHE := $(shell command -v ccache 2>/dev/null)
export CCACHE_BASEDIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
export CCACHE_NOHASHDIR := 1
