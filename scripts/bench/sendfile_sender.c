/* The reference point for the fetch benchmark: a bare sender that moves a file to N readers
 * over loopback with sendfile(2), nothing else, and reports its own CPU per GB sent
 * (utime + stime from getrusage). Readers are child processes that read and discard.
 *
 *   cc -O2 -o sendfile_sender sendfile_sender.c
 *   ./sendfile_sender <file> <readers> <passes>
 *
 * Prints: readers, bytes sent, seconds, MB/s, sender CPU-seconds per GB. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static off_t size;
static int passes;

static void *send_all(void *arg) {
    int sock = (int)(long)arg;
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror("open"); exit(1); }
    for (int p = 0; p < passes; p++) {
        off_t off = 0;
        while (off < size) {
            ssize_t n = sendfile(sock, fd, &off, (size_t)(size - off));
            if (n <= 0) { perror("sendfile"); exit(1); }
        }
    }
    close(fd);
    close(sock);
    return NULL;
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s <file> <readers> <passes>\n", argv[0]); return 2; }
    path = argv[1];
    int readers = atoi(argv[2]);
    passes = atoi(argv[3]);
    struct stat st;
    if (stat(path, &st) != 0) { perror("stat"); return 1; }
    size = st.st_size;

    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 64) || getsockname(l, (struct sockaddr *)&a, &alen)) {
        perror("listen"); return 1;
    }
    for (int i = 0; i < readers; i++) {
        if (fork() == 0) {
            int c = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(c, (struct sockaddr *)&a, sizeof a)) { perror("connect"); _exit(1); }
            static char buf[1 << 20];
            while (read(c, buf, sizeof buf) > 0) {}
            _exit(0);
        }
    }
    pthread_t t[256];
    int socks[256];
    for (int i = 0; i < readers; i++) socks[i] = accept(l, NULL, NULL);
    struct timespec s0, s1;
    clock_gettime(CLOCK_MONOTONIC, &s0);
    double c0 = cpu_seconds();
    for (int i = 0; i < readers; i++) pthread_create(&t[i], NULL, send_all, (void *)(long)socks[i]);
    for (int i = 0; i < readers; i++) pthread_join(t[i], NULL);
    double c1 = cpu_seconds();
    clock_gettime(CLOCK_MONOTONIC, &s1);
    while (wait(NULL) > 0) {}
    double secs = (s1.tv_sec - s0.tv_sec) + (s1.tv_nsec - s0.tv_nsec) / 1e9;
    double bytes = (double)size * passes * readers;
    printf("sendfile_sender readers=%d bytes=%.0f seconds=%.2f MB/s=%.0f cpu_s_per_GB=%.3f\n",
           readers, bytes, secs, bytes / secs / 1e6, (c1 - c0) / (bytes / 1e9));
    return 0;
}
