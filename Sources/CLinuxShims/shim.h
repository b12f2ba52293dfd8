// Linux headers that the Swift Glibc module does not export (epoll, eventfd, timerfd).
#pragma once
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <netinet/tcp.h>
