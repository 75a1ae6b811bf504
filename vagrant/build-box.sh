#!/usr/bin/env bash
# Build the kafka-chaos node box (Debian 12, libvirt provider) from Debian's
# packages and register it with `vagrant box add`, because Vagrant Cloud boxes
# cannot be downloaded on every machine (this project's CI among them).
#
# The box holds what a node needs and nothing else: systemd, sshd, Java 17,
# iptables, procps, ifupdown with a DHCP client (Vagrant configures the
# private network through it), sudo for the `vagrant` user, and Debian's cloud
# kernel, which has the virtio drivers built in and boots fastest under
# software emulation.  The disk has no partition table: one ext4 filesystem
# made straight from the debootstrapped tree (`mkfs.ext4 -d`, no mount) that
# boots through extlinux, which needs the filesystem mounted once to install.
#
# Idempotent and cached: the box version is a hash of this script, so an
# unchanged script with its box registered does nothing, and an edited one
# builds a new version.  The debootstrapped tree is cached per hash too.
#
# Usage: vagrant/build-box.sh [--force]
# Env:   KC_BOX_NAME (kafka-chaos/bookworm), KC_BOX_CACHE (/var/cache/kafka-chaos/box),
#        KC_DEBIAN_MIRROR (http://deb.debian.org/debian), KC_BOX_DISK_GB (8)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
name="${KC_BOX_NAME:-kafka-chaos/bookworm}"
cache="${KC_BOX_CACHE:-/var/cache/kafka-chaos/box}"
mirror="${KC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
disk_gb="${KC_BOX_DISK_GB:-8}"
force=0
[ "${1:-}" = "--force" ] && force=1

die() { echo "build-box: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot and a loop mount need it)"
for tool in debootstrap mkfs.ext4 qemu-img extlinux vagrant; do
  command -v "$tool" >/dev/null || die "$tool is not installed (setup.sh --vagrant installs it)"
done

# Vagrant versions are numbers: 0.0.<the hash's first 28 bits>.
hash="$(sha256sum "$0" | cut -c1-12)"
version="0.0.$((16#${hash:0:7}))"
if [ "$force" -eq 0 ] && vagrant box list 2>/dev/null | grep -qF "$name (libvirt, $version)"; then
  echo "build-box: $name $version (libvirt) is already registered"
  exit 0
fi

work="$cache/$hash"
rootfs="$work/rootfs"
mkdir -p "$work"
mnt=""
cleanup() {
  for m in "$rootfs/proc" "$rootfs/sys" "$rootfs/dev/pts" "$rootfs/dev" ${mnt:+"$mnt"}; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  [ -n "$mnt" ] && rmdir "$mnt" 2>/dev/null
  return 0
}
trap cleanup EXIT

started=$SECONDS
if [ ! -f "$work/rootfs.done" ]; then
  rm -rf "$rootfs"
  echo "build-box: debootstrap bookworm from $mirror"
  debootstrap --variant=minbase \
    --include=systemd-sysv,udev,dbus,openssh-server,sudo,ifupdown,isc-dhcp-client,iproute2,iptables,procps,kmod \
    bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || die "debootstrap failed: see $work/debootstrap.log"
  mount -t proc proc "$rootfs/proc"
  mount -t sysfs sys "$rootfs/sys"
  mount --bind /dev "$rootfs/dev"
  mount --bind /dev/pts "$rootfs/dev/pts"
  echo "build-box: installing Java 17 and the cloud kernel"
  chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    openjdk-17-jre-headless linux-image-cloud-amd64 >"$work/apt.log" 2>&1 \
    || die "apt-get install in the box failed: see $work/apt.log"
  chroot "$rootfs" apt-get clean
  cleanup

  echo "n1" >"$rootfs/etc/hostname"
  echo "/dev/vda / ext4 defaults,noatime 0 1" >"$rootfs/etc/fstab"
  cat >"$rootfs/etc/network/interfaces" <<'EOF'
# The management interface; Vagrant appends the private network below.
auto lo
iface lo inet loopback

auto eth0
iface eth0 inet dhcp
EOF
  # Vagrant logs in as `vagrant` with its well-known key and then swaps in a
  # per-machine one; provisioning lets root in with that key.
  chroot "$rootfs" useradd -m -s /bin/bash vagrant
  install -d -m 700 -o 1000 -g 1000 "$rootfs/home/vagrant/.ssh"
  insecure="$(dirname "$(gem contents vagrant 2>/dev/null | grep -m1 'keys/vagrant.pub$' || true)")"
  [ -f "$insecure/vagrant.pub" ] || insecure="$(dirname "$(find /usr/share/rubygems-integration /usr/lib/ruby /opt/vagrant -path '*keys/vagrant.pub' 2>/dev/null | head -1)")"
  [ -f "$insecure/vagrant.pub" ] || die "Vagrant's insecure public key (keys/vagrant.pub) was not found"
  install -m 600 -o 1000 -g 1000 "$insecure/vagrant.pub" "$rootfs/home/vagrant/.ssh/authorized_keys"
  echo "vagrant ALL=(ALL) NOPASSWD: ALL" >"$rootfs/etc/sudoers.d/vagrant"
  chmod 440 "$rootfs/etc/sudoers.d/vagrant"
  # No reverse DNS on login: the guests have no resolver worth waiting for.
  echo "UseDNS no" >"$rootfs/etc/ssh/sshd_config.d/kafka-chaos.conf"
  # A serial console, so a guest that does not come up can be read with `virsh console`.
  chroot "$rootfs" systemctl enable serial-getty@ttyS0.service >/dev/null 2>&1 || true
  # Host keys are made per machine at first boot, not baked into the box.
  rm -f "$rootfs"/etc/ssh/ssh_host_*
  cat >"$rootfs/etc/systemd/system/ssh-host-keys.service" <<'EOF'
[Unit]
Description=Generate SSH host keys on first boot
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
EOF
  chroot "$rootfs" systemctl enable ssh-host-keys.service >/dev/null 2>&1
  : >"$rootfs/etc/machine-id"  # each VM makes its own
  kernel="$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -1)"
  initrd="$(cd "$rootfs/boot" && ls initrd.img-* | sort -V | tail -1)"
  install -d "$rootfs/boot/extlinux"
  cat >"$rootfs/boot/extlinux/extlinux.conf" <<EOF
DEFAULT debian
TIMEOUT 0
PROMPT 0
LABEL debian
  LINUX /boot/$kernel
  INITRD /boot/$initrd
  APPEND root=/dev/vda rw console=ttyS0,115200 net.ifnames=0 biosdevname=0 quiet
EOF
  touch "$work/rootfs.done"
  echo "build-box: root filesystem ready after $((SECONDS - started)) s"
fi

echo "build-box: making the ${disk_gb} GB disk"
raw="$work/box.raw"
rm -f "$raw"
truncate -s "${disk_gb}G" "$raw"
mkfs.ext4 -q -F -L root -d "$rootfs" "$raw"
mnt="$(mktemp -d)"
mount -o loop "$raw" "$mnt"
extlinux --install "$mnt/boot/extlinux" >/dev/null 2>&1 || die "extlinux --install failed"
umount "$mnt" && rmdir "$mnt" && mnt=""
# The filesystem's own boot sector is the disk's first sector: BIOS runs extlinux.

echo "build-box: packing the box"
pack="$work/pack"
rm -rf "$pack" && mkdir -p "$pack"
qemu-img convert -O qcow2 "$raw" "$pack/box.img"
rm -f "$raw"
cat >"$pack/metadata.json" <<EOF
{"provider": "libvirt", "format": "qcow2", "virtual_size": $disk_gb}
EOF
cat >"$pack/Vagrantfile" <<'EOF'
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.disk_bus = "virtio"
  end
end
EOF
box="$work/kafka-chaos-bookworm.box"
tar -C "$pack" -cf "$box" metadata.json Vagrantfile box.img
rm -rf "$pack"
cat >"$work/box.json" <<EOF
{"name": "$name", "versions": [{"version": "$version", "providers": [{"name": "libvirt", "url": "file://$box"}]}]}
EOF
vagrant box add --force "$work/box.json" >/dev/null || die "vagrant box add failed"
echo "build-box: registered $name $version (libvirt) after $((SECONDS - started)) s"
