// Package pvefake is a Proxmox VE API fake for tests and for the local lab: one HTTPS server on
// a loopback address that answers the calls the bpg Terraform provider (v0.111.1, bridged as
// the proxmoxve Pulumi provider) makes for proxmox_virtual_environment_download_file with
// content_type "import" and proxmox_virtual_environment_vm with import_from disks, cloud-init,
// the guest agent, PCI mappings, tags, an EFI disk, started and stop_on_destroy. The contract
// tests in lab/pvecontract drive it with bpg's own client packages and resource code.
//
// # Wire format (as pve-http-server answers)
//
//   - HTTPS only, TLS 1.3 minimum, a self-signed certificate made at Start, HTTP/1.1; listens on
//     127.0.0.0/8 only and stops when its context ends or Close is called.
//   - Paths under /api2/json/; parameters from the query (GET, DELETE) and from
//     application/x-www-form-urlencoded bodies (POST, PUT); unknown parameters are refused
//     (additionalProperties => 0); trailing slashes are ignored (bpg's DELETE ends in "/?…").
//   - Authorization: PVEAPIToken=<user@realm!name>=<secret> for Options.Tokens, or a ticket
//     cookie (PVEAuthCookie + CSRFPreventionToken on writes) from POST /access/ticket for
//     Options.Users. Failures are 401 "No ticket", "invalid token value!", "no such token …".
//   - Success: 200 {"data": …}. Errors: the reason phrase is the first line of PVE's message
//     (the connection is hijacked for that, since net/http always writes the standard phrase),
//     the body {"data":null,"message":"…\n"}, plus "errors" for 400 "Parameter verification
//     failed.". Examples: 500 "Configuration file 'nodes/pve1/qemu-server/100.conf' does not
//     exist", 500 "VM 100 already exists on node 'pve1'", 400 {"errors":{"vmid":"VM 100 already
//     exists"}} from cluster/nextid. Routes the fake lacks answer 501 "Method 'GET /nodes/pve1/x'
//     not implemented" (PVE's own wording), are logged and counted under "UNKNOWN …".
//   - Configuration values come back with PVE's JSON types: integer and boolean options as
//     numbers, everything else as strings (bpg's decoders depend on it).
//
// # Tasks
//
// Calls that fork a worker in PVE answer a UPID "UPID:<node>:<pid>:<pstart>:<starttime>:<type>:
// <id>:<user@realm!token>:" (8-digit upper-case hex numbers; bpg's ParseTaskID accepts it).
// GET …/tasks/{upid}/status reports "running", then "stopped" with exitstatus "OK" or the error
// message; …/log ends with "TASK OK" or "TASK ERROR: <message>"; DELETE stops a running task
// ("interrupted by signal"). Without latency a task has finished when its UPID is returned, so
// bpg's first poll sees it stopped; with latency (see below) it stays running that long and its
// effect happens at the end. Task types: download, imgdel, qmcreate, qmdestroy, qmconfig,
// resize, qmstart, qmstop, qmshutdown, qmreboot.
//
// # State
//
// Nodes (Options.Nodes), storages per node (Options.Storages, default "local" dir with
// iso,import,vztmpl,snippets and "local-lvm" lvmthin with images,rootdir) and shared storages
// seen from every node (Options.SharedStorages), their volumes, VMs, pools and tasks.
//
//   - GET /cluster/status: several nodes form a cluster named Options.ClusterName (default
//     DefaultClusterName), answered as a "cluster" entry plus one "node" entry per host (corosync
//     ids in the order of Options.Nodes, the first node "local"); one node without ClusterName is
//     a standalone host (its entry alone, nodeid 0). Node addresses are Options.NodeIPs, else the
//     fake's own.
//   - download-url fetches the URL for real (loopback hosts only) into memory and creates
//     <storage>:<content>/<file>; it refuses an existing file with PVE's task error "refusing to
//     override existing file '<path>'", which bpg's overwrite_unmanaged logic looks for. It
//     checks checksums and decompresses gz and bz2 (iso only, like PVE).
//   - query-url-metadata sends a HEAD request and answers filename (Content-Disposition, else the
//     URL's last segment), size (Content-Length) and mimetype.
//   - POST qemu parses drives like PVE: "local-lvm:0,import-from=local:import/x.qcow2,…" becomes
//     "local-lvm:vm-100-disk-0,…,size=<virtual size of the image>" (the qcow2 header's size, else
//     the file size), "local-lvm:20" allocates 20 GiB, "local-lvm:cloudinit" becomes
//     "local-lvm:vm-100-cloudinit,media=cdrom", efidisk0 gets its EFI vars volume; options are
//     printed sorted, format and import-from dropped. NICs without a MAC get one in Proxmox' OUI
//     BC:24:11, tags are de-duplicated and sorted with ';', smbios1, vmgenid, meta and boot are
//     filled in. Other options are stored as sent.
//   - POST …/storage/{storage}/content allocates an image as pve-storage's vdisk_alloc does (the
//     Proxmox CSI plugin's volumes): size in KiB unless suffixed M or G, any owner vmid (the VM
//     need not exist), dir storages <vmid>/<name>.<raw|qcow2|vmdk>, block storages
//     vm-<vmid>-<anything>, refusals and "already exists" errors in the plugins' words; it answers
//     the volid. The storage's content types are not checked (PVE does not), but GET …/content
//     lists only the types the storage holds, as PVE does. DELETE frees it ("<vmid>@<storage>"
//     imgdel task, Datastore.Allocate).
//   - A VM's volumes are freed on destroy (all vm-<id>-* with destroy-unreferenced-disks=1);
//     deleting a drive with PUT config turns it into unusedN (cloud-init drives are freed).
//
// # Hooks for the lab controller
//
// Options.OnEvent (or SetEventHandler) receives created, started, rebooted, stopped and deleted
// events with node, vmid, name, raw ipconfig0 and nameserver, agent flag, net0 MAC, the NICs
// (Event.NICs: netN's MAC, bridge, VLAN tag and the MTU the guest gets) and the configuration;
// nics-changed when a configuration update hot-plugs, unplugs or replaces NICs of a running VM
// (the hotplug option's "network", on by default). NIC MTUs are checked as qemu-server builds the
// device: a virtio NIC on a bridge gets the bridge's MTU (Options.BridgeMTU, default 1500) unless
// its mtu is set, and mtu above the bridge's or below 576 fails the start task ("netdev net1: MTU
// '9000' is bigger than the bridge MTU '1500'") and refuses a hot-plug with PVE's 400 ("hotplug
// problem - …"), which leaves the configuration as it was. The guest agent
// (agent/network-get-interfaces, agent/ping) answers only for a running VM with the agent enabled
// ("No QEMU guest agent configured", "VM 100 is not running" otherwise) and reports lo, then eth0,
// eth1, … for the VM's NICs, each with its ipconfigN static ip and ip6; eth0 with the address
// given to SetGuestAddress instead of ipconfig0's ip; with ip=dhcp and no address it answers
// "QEMU guest agent is not running", which bpg retries. bpg waits for a global unicast address:
// 127.0.0.0/8 never satisfies it.
//
// # Test knobs
//
// Options.FailureRate / SetFailureRate fail that share of calls with a PVE-like 500 ("cfs-lock
// … got lock request timeout") or 503 before any side effect; whether the n-th call of a route
// fails depends only on the seed (Options.Seed), the route key and n, so a seed replays the same
// failures per route however concurrent calls interleave. SetRouteFailureRate and FailNext
// target routes; FailNextTaskStatus fails the next status reads of finished tasks of a type
// ("qmcreate", …); FailNextTask makes the next task of a route end in "TASK ERROR: <message>"
// without its effect; InjectedFailures counts the calls failed on purpose. Options.Latency, RouteLatency, SetLatency and SetRouteLatency delay calls; on task
// routes the delay is the task's running time instead. Rules name route keys such as
// "POST /nodes/{node}/qemu" (see Routes), optionally ending in "*" or without the method.
// VMs, VM, Volumes, Tasks, Calls and CallCount inspect the state; AddFile seeds files.
//
// # Simplified (by choice)
//
//   - Permissions are PVE's (access.go, perm.go): users, API tokens with privilege separation,
//     built-in and custom roles, ACLs with propagation, NoAccess and pool inheritance; every
//     routed method runs its schema "permissions" check, and the handlers the product uses run
//     qemu-server's, pve-storage's and pve-manager's own checks (VM create/update options,
//     storages, PCI mappings, bridges; list filters). The default token root@pam!lab has no
//     privilege separation, so root@pam's privileges. Options.Access seeds users, tokens,
//     roles and ACLs; /access serves users, tokens, roles, acl and permissions. Groups, realms
//     other than pam/pve, token expiry and TFA are not modelled. No HA, replication, snapshots, migration, clone, templates'
//     linked clones, move_disk, LXC, firewall, SDN, pending changes (config changes apply at
//     once, also on running VMs; a NIC change with network hot-plug off reaches the guest at its
//     next start), locks, config digests checks, storage capacity limits.
//   - Parameter checks cover names, integer/boolean/number types, a few enums, drive and NIC
//     option names and VM names; other formats are not validated.
//   - Images are not validated (a non-qcow2 file named .qcow2 imports with its file size); zst
//     and lzo decompression are missing; download errors are worded "download failed - <HTTP
//     status>" rather than wget's exit codes.
package pvefake
