"""Node backends: local network namespaces, Vagrant VMs, SSH inventory."""
