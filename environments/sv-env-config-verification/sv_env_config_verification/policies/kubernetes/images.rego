package svcv.kubernetes

import rego.v1

rules["k8s-image-not-pinned"] := {"severity": "medium", "title": "Image uses the :latest tag or no tag at all"}

unpinned(img) if {
	not contains(img, "@")
	endswith(img, ":latest")
}

unpinned(img) if {
	not contains(img, "@")
	parts := split(img, "/")
	not contains(parts[count(parts) - 1], ":")
}

deny contains f if {
	some c in containers
	unpinned(c.image)
	f := finding("k8s-image-not-pinned", sprintf("%v: container %v uses image %v (tag :latest or none)", [resource_name, c.name, c.image]))
}
