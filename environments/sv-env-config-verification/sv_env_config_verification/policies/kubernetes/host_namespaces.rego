package svcv.kubernetes

import rego.v1

rules["k8s-host-network"] := {"severity": "high", "title": "Pod shares the node's network namespace (hostNetwork)"}

deny contains f if {
	pod_spec.hostNetwork == true
	f := finding("k8s-host-network", sprintf("%v: hostNetwork: true", [resource_name]))
}

rules["k8s-host-pid"] := {"severity": "high", "title": "Pod shares the node's process namespace (hostPID)"}

deny contains f if {
	pod_spec.hostPID == true
	f := finding("k8s-host-pid", sprintf("%v: hostPID: true", [resource_name]))
}

rules["k8s-host-ipc"] := {"severity": "high", "title": "Pod shares the node's IPC namespace (hostIPC)"}

deny contains f if {
	pod_spec.hostIPC == true
	f := finding("k8s-host-ipc", sprintf("%v: hostIPC: true", [resource_name]))
}

rules["k8s-host-path-volume"] := {"severity": "high", "title": "Pod mounts a path from the node's filesystem (hostPath)"}

deny contains f if {
	some v in pod_spec.volumes
	v.hostPath
	f := finding("k8s-host-path-volume", sprintf("%v: volume %v mounts hostPath %v", [resource_name, v.name, object.get(v, ["hostPath", "path"], "?")]))
}
