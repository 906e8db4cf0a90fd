/*
 * The pod sandbox's pause process, built here with gcc -static (tools/kube/src/node-images.ts) because the
 * registry.k8s.io image cannot be pulled on these machines.
 *
 * It holds the pod's namespaces open and does nothing else: as PID 1 of the pod's PID namespace (when the pod shares
 * one) it reaps orphans; SIGINT and SIGTERM end it with status 0. `-v` prints its name and exits.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static int handle(int sig, void (*fn)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("kvt-pause");
    return 0;
  }
  if (getpid() != 1) fputs("kvt-pause: not PID 1; it is meant to be a pod's sandbox process\n", stderr);
  if (handle(SIGINT, on_stop, 0) < 0 || handle(SIGTERM, on_stop, 0) < 0 ||
      handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART) < 0) {
    perror("kvt-pause: sigaction");
    return 1;
  }
  for (;;) pause();
}
