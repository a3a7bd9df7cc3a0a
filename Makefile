# herd: `make run` serves the demo site, `make test` runs every test.
# Both install what they need first (scripts/deps.sh).

CC      ?= gcc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wno-missing-field-initializers
CPPFLAGS := -D_GNU_SOURCE -Isrc
ALLFLAGS = -std=gnu11 $(WARN) $(CPPFLAGS) $(CFLAGS) -MMD -MP
LISTEN  ?= 127.0.0.1:8080

# make install: PREFIX for the binary and docs; the config, the logrotate
# snippet and the units go where the system looks for them. DESTDIR is
# prepended to every path (staging, packaging); the paths written into the
# installed units and config are the ones without it.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
DOCDIR     ?= $(PREFIX)/share/doc/herd
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
LDLIBS  := -pthread -lm -luring -lssl -lcrypto
FUZZ_SECONDS ?= 20

SRCS      := $(wildcard src/*/*.c)
LIB_SRCS  := $(filter-out src/cmd/%,$(SRCS))
OBJS      := $(SRCS:src/%.c=build/obj/%.o)
LIB_OBJS  := $(LIB_SRCS:src/%.c=build/obj/%.o)
ASAN_OBJS := $(SRCS:src/%.c=build-asan/obj/%.o)
ASAN_LIB  := $(LIB_SRCS:src/%.c=build-asan/obj/%.o)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=build/unit/%)
ASAN_UNIT := $(UNIT_SRCS:tests/unit/%.c=build-asan/unit/%)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)
SAN       := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

.PHONY: all help install uninstall build run test deps deps-test unit diff integration integration-default integration-models asan asan-test fuzz clean demo bench-coro bench-static bench-send-path
all: build

build: build/herd demo

build/herd: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -c -o $@ $<

# The live status page is assembled into this object (.incbin).
build/obj/http/status_html.o build-asan/obj/http/status_html.o: src/http/status_page.html

build-asan/herd: $(ASAN_OBJS)
	$(CC) -O1 -g $(SAN) -o $@ $^ $(LDLIBS)

build-asan/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CPPFLAGS) -O1 -g $(SAN) -MMD -MP -c -o $@ $<

# The demo site's larger file is generated, not committed.
demo: www/big.bin
www/big.bin:
	head -c 8388608 /dev/urandom > $@

run: deps build
	@mkdir -p logs
	@echo "herd: serving www/ on http://$(LISTEN)/  (status: http://$(LISTEN)/herd-status, log: logs/access.log; Ctrl-C stops)"
	exec build/herd serve www --listen $(LISTEN) --access-log logs/access.log --status-path /herd-status

# The shipped units and config name the default paths; install writes the
# chosen ones in their place.
INSTALL_PATHS := sed -e 's|/usr/local/bin/herd|$(BINDIR)/herd|g' \
	-e 's|/usr/local/share/doc/herd|$(DOCDIR)|g' -e 's|/etc/herd|$(SYSCONFDIR)/herd|g' \
	-e 's|/etc/logrotate.d|$(SYSCONFDIR)/logrotate.d|g'
UNITS := herd.service herd.socket herd-spawn@.service

# A config already there is the admin's: it is kept, and the new sample
# goes next to it as herd.conf.sample.
install: build/herd
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(SYSCONFDIR)/herd $(DESTDIR)$(SYSCONFDIR)/logrotate.d
	install -m 755 build/herd $(DESTDIR)$(BINDIR)/herd
	install -m 644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	for u in $(UNITS); do \
	  $(INSTALL_PATHS) contrib/$$u > $(DESTDIR)$(UNITDIR)/$$u.tmp && \
	  chmod 644 $(DESTDIR)$(UNITDIR)/$$u.tmp && \
	  mv $(DESTDIR)$(UNITDIR)/$$u.tmp $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	$(INSTALL_PATHS) contrib/herd.logrotate > $(DESTDIR)$(SYSCONFDIR)/logrotate.d/herd
	conf=$(DESTDIR)$(SYSCONFDIR)/herd/herd.conf; \
	  if [ -e $$conf ]; then conf=$$conf.sample; fi; \
	  $(INSTALL_PATHS) contrib/herd.conf > $$conf && chmod 644 $$conf && echo "installed $$conf"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/herd $(DESTDIR)$(SYSCONFDIR)/logrotate.d/herd \
	  $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) $(DESTDIR)$(SYSCONFDIR)/herd/herd.conf.sample
	rm -rf $(DESTDIR)$(DOCDIR)
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/herd/herd.conf (yours)"

help:
	@echo "make build                 build/herd (and the demo site's big file)"
	@echo "make run [LISTEN=ADDR]     serve www/ on ADDR (default $(LISTEN)), access log in logs/"
	@echo "make install [PREFIX=/usr/local] [DESTDIR=] [SYSCONFDIR=/etc] [UNITDIR=PREFIX/lib/systemd/system]"
	@echo "                           binary, docs, systemd units, logrotate snippet, sample config"
	@echo "make uninstall             the same paths, except a herd.conf that is yours"
	@echo "make test                  every test (15+ minutes); unit, diff, integration, asan-test, fuzz alone"
	@echo "make clean                 remove build, build-asan, build-fuzz"

deps:
	@sh scripts/deps.sh build

deps-test:
	@sh scripts/deps.sh test

# ---- tests ----
test: deps-test build unit diff integration asan-test fuzz
	@echo "make test: all passed"

build/unit/%: tests/unit/%.c $(LIB_OBJS) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -Itests/unit -o $@ $< $(LIB_OBJS) $(LDLIBS)

build-asan/unit/%: tests/unit/%.c $(ASAN_LIB) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CPPFLAGS) -O1 -g $(SAN) -Itests/unit -o $@ $< $(ASAN_LIB) $(LDLIBS)

unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do timeout 120 $$t || exit 1; done

# The whole suite runs on the default model; the HTTP part of it runs again
# on every other model (the process tests pick their model themselves).
PART1 := $(addprefix tests/integration/,test_cli.py test_static.py \
	test_keepalive_pipeline.py test_conditional_range.py test_parsing_errors.py \
	test_paths.py test_timeouts.py test_robustness.py test_proxy_protocol.py \
	test_redirects.py test_status_access.py)
OTHER_MODELS := prefork dispatch threads iterative single coro1 coro2 uring
PYTEST := python3 -m pytest -q -p no:cacheprovider

# An allocation counter the hot-path test preloads (tests/tools).
build/malloc_count.so: tests/tools/malloc_count.c
	@mkdir -p build
	$(CC) -O2 -shared -fPIC -o $@ $<

# LD_PRELOAD shims for tests (tests/tools): small socket buffers for the
# handover tests, a slow empty peek for the TLS one, sends cut short for
# the 100 Continue ones.
SHIMS := build/sockbuf_cap.so build/slow_peek.so build/slow_connect.so build/taken_port.so \
	build/short_send.so
$(SHIMS): build/%.so: tests/tools/%.c
	@mkdir -p build
	$(CC) -O2 -shared -fPIC -o $@ $< -ldl

integration: integration-default integration-models

integration-default: build/herd demo build/malloc_count.so $(SHIMS)
	timeout 1500 $(PYTEST) tests/integration

integration-models: build/herd demo build/malloc_count.so $(SHIMS)
	@for m in $(OTHER_MODELS); do \
	  if [ $$m = iterative ]; then sel="not concurrency"; else sel=""; fi; \
	  case $$m in coro*) args="--model coro --threads $${m#coro}";; *) args="--model $$m";; esac; \
	  echo "integration: $$args"; \
	  HERD_ARGS="$$args" timeout 900 $(PYTEST) -m "$$sel" $(PART1) || exit 1; \
	done

# The differential test: herd's parsers against h11 on generated messages
# (tests/diff). Its driver is built with ASan and UBSan: every input is
# hostile by design. HERD_DIFF_SEED and HERD_DIFF_CASES change the run.
DIFF_BIN := build-asan/diff/verdict
$(DIFF_BIN): tests/diff/verdict.c $(ASAN_LIB)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CPPFLAGS) -O1 -g $(SAN) -MMD -MP -o $@ $< $(ASAN_LIB) $(LDLIBS)

diff: $(DIFF_BIN)
	HERD_VERDICT=$(DIFF_BIN) timeout 300 $(PYTEST) -s tests/diff

asan: build-asan/herd

# The HTTP part runs with an access log and --max-header-size 64k on every
# server the fixtures start (conftest.py, HERD_ACCESS_LOG), so hostile input
# also goes through the log path under ASan; the other files check defaults
# and process trees (no logger) and run as they are.
ASAN_LOG := HERD_ACCESS_LOG=build-asan/access-logs

asan-test: build-asan/herd $(ASAN_UNIT) $(SHIMS)
	@for t in $(ASAN_UNIT); do timeout 300 $$t || exit 1; done
	rm -rf build-asan/access-logs
	HERD_BIN=build-asan/herd timeout 2400 $(PYTEST) $(addprefix --ignore=,$(PART1)) tests/integration
	HERD_BIN=build-asan/herd $(ASAN_LOG) timeout 1200 $(PYTEST) $(PART1)
	HERD_BIN=build-asan/herd HERD_ARGS="--model threads" $(ASAN_LOG) timeout 1200 $(PYTEST) $(PART1)
	HERD_BIN=build-asan/herd HERD_ARGS="--model coro --threads 2" $(ASAN_LOG) timeout 1200 $(PYTEST) $(PART1)
	HERD_BIN=build-asan/herd HERD_ARGS="--model uring" $(ASAN_LOG) timeout 1200 $(PYTEST) $(PART1)

# libFuzzer targets, built with clang, run for FUZZ_SECONDS each on a copy
# of the committed corpus (new inputs do not dirty the tree).
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_SRCS)
	@mkdir -p build-fuzz
	clang -g -O1 -fsanitize=fuzzer,address,undefined $(CPPFLAGS) -o $@ $< $(LIB_SRCS) $(LDLIBS)

fuzz: $(FUZZ_BINS)
	@for f in $(FUZZ_BINS); do \
	  name=$$(basename $$f); corpus=tests/fuzz/corpus/$${name#fuzz_}; \
	  rm -rf build-fuzz/work-$$name; mkdir -p build-fuzz/work-$$name; \
	  cp $$corpus/* build-fuzz/work-$$name/ 2>/dev/null || true; \
	  echo "fuzz: $$name for $(FUZZ_SECONDS)s"; \
	  timeout $$(( $(FUZZ_SECONDS) + 60 )) $$f -max_total_time=$(FUZZ_SECONDS) -timeout=5 \
	    -dict=tests/fuzz/http.dict -artifact_prefix=build-fuzz/ \
	    build-fuzz/work-$$name $$corpus > build-fuzz/$$name.log 2>&1 \
	    || { tail -40 build-fuzz/$$name.log; exit 1; }; \
	  grep -h "^Done\|stat::number_of_executed_units" build-fuzz/$$name.log | tail -1; \
	done

# The coroutine switch microbenchmark (not part of `make test`).
build/bench/coro_yield: bench/coro_yield.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -o $@ $< $(LIB_OBJS) $(LDLIBS)

bench-coro: build/bench/coro_yield
	taskset -c 0 build/bench/coro_yield

# The handler's cost of a warm static request, sidecars included (not part
# of `make test`).
build/bench/static_handle: bench/static_handle.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -o $@ $< $(LIB_OBJS) $(LDLIBS)

bench-static: build/bench/static_handle
	taskset -c 0 build/bench/static_handle

# What a file body costs its sender over loopback, by send path: copy,
# sendfile, MSG_ZEROCOPY, io_uring SEND and SEND_ZC (not part of `make test`).
build/bench/send_path: bench/send_path.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLFLAGS) -o $@ $< $(LDLIBS)

bench-send-path: build/bench/send_path
	build/bench/send_path

clean:
	rm -rf build build-asan build-fuzz

-include $(OBJS:.o=.d) $(ASAN_OBJS:.o=.d) $(DIFF_BIN).d
