# Top-level Makefile: the runtime library, tools, the kernel module and the tests.
#   make            libtencache + tools (userspace only, no kernel headers needed)
#   make module     tencache.ko against /usr/src/linux-headers-$(KVER)
#   make test       every test suite (runtime, planner, module in a QEMU VM)
KVER ?= $(shell ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sed 's|.*/linux-headers-||' | sort -V | tail -1)
KDIR ?= /usr/src/linux-headers-$(KVER)

.PHONY: all lib tools module module-clean test clean
all: lib tools
lib:
	$(MAKE) -C runtime
tools: lib
	$(MAKE) -C tools
module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
module-clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
test:
	bash tests/run-all.sh
clean:
	rm -rf build
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean >/dev/null 2>&1
