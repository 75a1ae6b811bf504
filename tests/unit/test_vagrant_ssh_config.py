"""Parsing real-shaped `vagrant ssh-config` and `vagrant status` output into Nodes."""

from __future__ import annotations

import pytest
from kafka_chaos.harness.backends.vagrant import (
    nodes_from_ssh_config,
    parse_ssh_config,
    parse_status,
    private_address,
)
from kafka_chaos.harness.errors import HarnessError

# `vagrant ssh-config` of a 3-machine VirtualBox setup (Vagrant 2.3): forwarded
# ports on 127.0.0.1, one private key per machine.
VIRTUALBOX = """\
Host n1
  HostName 127.0.0.1
  User vagrant
  Port 2222
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /home/alice/kafka-chaos/vagrant/.vagrant/machines/n1/virtualbox/private_key
  IdentitiesOnly yes
  LogLevel FATAL
  PubkeyAcceptedKeyTypes +ssh-rsa
  HostKeyAlgorithms +ssh-rsa

Host n2
  HostName 127.0.0.1
  User vagrant
  Port 2200
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /home/alice/kafka-chaos/vagrant/.vagrant/machines/n2/virtualbox/private_key
  IdentitiesOnly yes
  LogLevel FATAL
  PubkeyAcceptedKeyTypes +ssh-rsa
  HostKeyAlgorithms +ssh-rsa

Host n3
  HostName 127.0.0.1
  User vagrant
  Port 2201
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /home/alice/kafka-chaos/vagrant/.vagrant/machines/n3/virtualbox/private_key
  IdentitiesOnly yes
  LogLevel FATAL
  PubkeyAcceptedKeyTypes +ssh-rsa
  HostKeyAlgorithms +ssh-rsa
"""

# libvirt: machines on their management addresses, port 22; a project path
# with a space makes Vagrant quote IdentityFile; machines listed out of order.
LIBVIRT = """\
Host n2
  HostName 192.168.121.87
  User vagrant
  Port 22
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile "/home/bob/My Projects/kc/vagrant/.vagrant/machines/n2/libvirt/private_key"
  IdentitiesOnly yes
  LogLevel FATAL

Host n1
  HostName 192.168.121.45
  User vagrant
  Port 22
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile "/home/bob/My Projects/kc/vagrant/.vagrant/machines/n1/libvirt/private_key"
  IdentityFile /home/bob/.vagrant.d/insecure_private_key
  IdentitiesOnly yes
  LogLevel FATAL
"""

STATUS = """\
1700000000,n1,metadata,provider,libvirt
1700000000,n2,metadata,provider,libvirt
1700000000,n1,provider-name,libvirt
1700000000,n1,state,running
1700000000,n1,state-human-short,running
1700000000,n1,state-human-long,The Libvirt domain is running.
1700000000,n2,provider-name,libvirt
1700000000,n2,state,shutoff
1700000000,n2,state-human-short,shutoff
1700000000,,ui,info,Current machine states:\\n\\nn1 running (libvirt)
"""


def test_virtualbox_hosts_ports_and_keys() -> None:
    hosts = parse_ssh_config(VIRTUALBOX)
    assert [h.alias for h in hosts] == ["n1", "n2", "n3"]
    assert [h.port for h in hosts] == [2222, 2200, 2201]
    assert {h.hostname for h in hosts} == {"127.0.0.1"}
    assert all(h.user == "vagrant" for h in hosts)
    assert hosts[1].identity_file == (
        "/home/alice/kafka-chaos/vagrant/.vagrant/machines/n2/virtualbox/private_key"
    )


def test_quoted_identity_file_and_first_one_wins() -> None:
    hosts = {h.alias: h for h in parse_ssh_config(LIBVIRT)}
    assert hosts["n1"].hostname == "192.168.121.45"
    assert hosts["n1"].port == 22
    assert hosts["n1"].identity_file == (
        "/home/bob/My Projects/kc/vagrant/.vagrant/machines/n1/libvirt/private_key"
    )


def test_nodes_connect_as_root_via_ssh_config_but_use_private_addresses() -> None:
    nodes = nodes_from_ssh_config(
        parse_ssh_config(LIBVIRT), "vc", "192.168.56", "/state/vc/known_hosts"
    )
    assert [(n.name, n.node_id, n.address) for n in nodes] == [
        ("n1", 1, "192.168.56.11"),
        ("n2", 2, "192.168.56.12"),
    ]
    n2 = nodes[1]
    assert (n2.ssh.host, n2.ssh.port, n2.ssh.user) == ("192.168.121.87", 22, "root")
    assert n2.ssh.known_hosts == "/state/vc/known_hosts"
    assert n2.root_dir == "/var/lib/kafka-chaos/vc"


def test_key_equals_value_syntax_and_comments() -> None:
    hosts = parse_ssh_config("# generated\nHost=n4\n  HostName=10.0.0.4\n  port = 2022\n")
    assert (hosts[0].alias, hosts[0].hostname, hosts[0].port) == ("n4", "10.0.0.4", 2022)
    assert hosts[0].identity_file is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("  HostName 1.2.3.4\n", "before any Host"),
        ("Host n1\n  User vagrant\n", "has no HostName"),
        ("Host n1\n  HostName 1.2.3.4\n  Port twenty\n", "bad Port"),
        ("Host n1\n  HostName\n", "no value"),
    ],
)
def test_malformed_ssh_config_is_named(text: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        parse_ssh_config(text)


def test_machines_must_follow_the_vagrantfile_naming() -> None:
    with pytest.raises(HarnessError, match="'kafka1' is not named n<i>"):
        private_address("192.168.56", "kafka1")
    assert private_address("10.9.8", "n5") == "10.9.8.15"


def test_status_states() -> None:
    assert parse_status(STATUS) == {"n1": "running", "n2": "shutoff"}
