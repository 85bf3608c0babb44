package events

import (
	"fmt"
	"strings"

	"github.com/parleyhq/parley/core"
)

// jsonPatchTouches reads an RFC 6902 JSON patch. add and replace write their value at path; remove
// removes path; move removes from and writes path; copy writes path; test writes nothing. A value
// the patch does not carry (move, copy, appends with "-") is taken from the response object, and
// counted unresolved when there is none. It returns the touches and the number of ops it could not
// read.
func jsonPatchTouches(ops []any) ([]touch, int) {
	var out []touch
	bad := 0
	for _, o := range ops {
		m, ok := o.(map[string]any)
		path := stringAt(m, "path")
		if !ok || !validPointer(path) {
			bad++
			continue
		}
		switch stringAt(m, "op") {
		case "add", "replace":
			val, has := m["value"]
			if last := strings.LastIndexByte(path, '/'); path[last+1:] == "-" {
				// Appended to a list: its index is only known from the live object.
				out = append(out, touch{ptr: path[:last]})
				continue
			}
			if !has {
				bad++
				continue
			}
			out = append(out, touch{ptr: path, val: val, has: true})
		case "remove":
			out = append(out, touch{ptr: path, removed: true})
		case "move":
			from := stringAt(m, "from")
			if !validPointer(from) {
				bad++
				continue
			}
			out = append(out, touch{ptr: from, removed: true}, touch{ptr: path})
		case "copy":
			out = append(out, touch{ptr: path})
		case "test":
		default:
			bad++
		}
	}
	return out, bad
}

func validPointer(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return false
		}
	}
	return true
}

// mergeKeys identify list elements in strategic merge patches and apply configurations, in the
// order tried: the patch merge keys of the built-in types (containers and volumes by name, ports by
// containerPort or port, volumeMounts by mountPath, tolerations by key, ...).
var mergeKeys = []string{"name", "containerPort", "port", "mountPath", "devicePath", "ip", "key", "topologyKey", "type"}

// mergeTouches reads an object patch: a JSON merge patch (RFC 7386), a strategic merge patch or an
// apply configuration. Every leaf is a write, null is a removal. Strategic-merge directives are
// handled as follows: "$patch": "delete" on an object removes it, "$patch": "replace" is a write of
// the object as given, "$deleteFromPrimitiveList/<key>" marks the list <key> as written (its live
// value tells what is left), and "$setElementOrder/<key>" and "$retainKeys" only order or prune
// what the patch states anyway and are skipped.
//
// Lists of objects are merged by key in strategic merge and apply (by position in a merge patch),
// so the index of an element is only known from the live object: with the response object the
// element with the same merge key is found; without it, an apply configuration's own positions are
// used (it states its whole list), and a patch's list elements are counted unresolved. It returns the
// number of unresolved parts.
func mergeTouches(p map[string]any, live any, ptr string, byPosition bool, depth int, out *[]touch) int {
	if depth > maxTreeDepth {
		*out = append(*out, touch{ptr: ptr})
		return 0
	}
	unresolved := 0
	for _, k := range sortedKeys(p) {
		v := p[k]
		if strings.HasPrefix(k, "$") {
			if list, ok := strings.CutPrefix(k, "$deleteFromPrimitiveList/"); ok {
				*out = append(*out, touch{ptr: ptr + "/" + core.EscapePointerToken(list)})
			}
			continue
		}
		cp := ptr + "/" + core.EscapePointerToken(k)
		var lv any
		if m, ok := live.(map[string]any); ok {
			lv = m[k]
		}
		switch x := v.(type) {
		case nil:
			*out = append(*out, touch{ptr: cp, removed: true})
		case map[string]any:
			if stringAt(x, "$patch") == "delete" {
				*out = append(*out, touch{ptr: cp, removed: true})
				continue
			}
			if len(x) == 0 {
				*out = append(*out, touch{ptr: cp, val: x, has: true})
				continue
			}
			unresolved += mergeTouches(x, lv, cp, byPosition, depth+1, out)
		case []any:
			scalars := true
			for _, e := range x {
				scalars = scalars && isScalar(e)
			}
			if scalars {
				if live != nil {
					*out = append(*out, touch{ptr: cp}) // a primitive list may be merged: read the result
				} else {
					*out = append(*out, touch{ptr: cp, val: x, has: true})
				}
				continue
			}
			liveList, _ := lv.([]any)
			for i, e := range x {
				em, ok := e.(map[string]any)
				if !ok {
					unresolved++
					continue
				}
				idx := -1
				switch {
				case liveList != nil:
					idx = matchElement(em, liveList)
				case byPosition:
					idx = i
				}
				if idx < 0 || stringAt(em, "$patch") == "delete" {
					unresolved++
					continue
				}
				var le any
				if liveList != nil {
					le = liveList[idx]
				}
				// The merge key names the element; it is not a value the patch changed.
				if k := elementKey(em); k != "" {
					rest := make(map[string]any, len(em)-1)
					for ek, ev := range em {
						if ek != k {
							rest[ek] = ev
						}
					}
					em = rest
				}
				unresolved += mergeTouches(em, le, fmt.Sprintf("%s/%d", cp, idx), byPosition, depth+1, out)
			}
		default:
			*out = append(*out, touch{ptr: cp, val: x, has: true})
		}
	}
	return unresolved
}

// elementKey is the merge key a list element is identified by, or "".
func elementKey(e map[string]any) string {
	for _, key := range mergeKeys {
		if v, ok := e[key]; ok && isScalar(v) {
			return key
		}
	}
	return ""
}

// matchElement finds the live list element with the same merge key as the patch element.
func matchElement(e map[string]any, live []any) int {
	for _, key := range mergeKeys {
		want, ok := e[key]
		if !ok || !isScalar(want) {
			continue
		}
		for i, l := range live {
			if lm, ok := l.(map[string]any); ok && isScalar(lm[key]) && fmt.Sprint(lm[key]) == fmt.Sprint(want) {
				return i
			}
		}
		return -1
	}
	return -1
}

// resourceKinds maps group/resource to kind for the built-in types Parley users keep in Git. It is
// needed where the audit event carries no object with a kind: the scale subresource (its object is
// a Scale) and patches without a response object. Other resources are named by the kind in the
// request or response object and are ignored ("unknown-resource-kind") when neither has one.
var resourceKinds = map[string]string{
	"apps/deployments": "Deployment", "apps/statefulsets": "StatefulSet", "apps/replicasets": "ReplicaSet",
	"apps/daemonsets": "DaemonSet", "/configmaps": "ConfigMap", "/secrets": "Secret", "/services": "Service",
	"/serviceaccounts": "ServiceAccount", "/namespaces": "Namespace", "/persistentvolumeclaims": "PersistentVolumeClaim",
	"/persistentvolumes": "PersistentVolume", "/replicationcontrollers": "ReplicationController",
	"/limitranges": "LimitRange", "/resourcequotas": "ResourceQuota",
	"autoscaling/horizontalpodautoscalers": "HorizontalPodAutoscaler", "batch/jobs": "Job", "batch/cronjobs": "CronJob",
	"networking.k8s.io/ingresses": "Ingress", "networking.k8s.io/networkpolicies": "NetworkPolicy",
	"networking.k8s.io/ingressclasses": "IngressClass", "policy/poddisruptionbudgets": "PodDisruptionBudget",
	"rbac.authorization.k8s.io/roles": "Role", "rbac.authorization.k8s.io/rolebindings": "RoleBinding",
	"rbac.authorization.k8s.io/clusterroles": "ClusterRole", "rbac.authorization.k8s.io/clusterrolebindings": "ClusterRoleBinding",
	"storage.k8s.io/storageclasses": "StorageClass", "scheduling.k8s.io/priorityclasses": "PriorityClass",
	"apiextensions.k8s.io/customresourcedefinitions":                 "CustomResourceDefinition",
	"admissionregistration.k8s.io/validatingwebhookconfigurations":   "ValidatingWebhookConfiguration",
	"admissionregistration.k8s.io/mutatingwebhookconfigurations":     "MutatingWebhookConfiguration",
	"keda.sh/scaledobjects":                                          "ScaledObject",
	"kustomize.toolkit.fluxcd.io/kustomizations":                     "Kustomization",
	"helm.toolkit.fluxcd.io/helmreleases":                            "HelmRelease",
	"argoproj.io/applications":                                       "Application",
	"argoproj.io/applicationsets":                                    "ApplicationSet",
	"monitoring.coreos.com/prometheusrules":                          "PrometheusRule",
	"policy.networking.k8s.io/adminnetworkpolicies":                  "AdminNetworkPolicy",
	"gateway.networking.k8s.io/httproutes":                           "HTTPRoute",
	"autoscaling.k8s.io/verticalpodautoscalers":                      "VerticalPodAutoscaler",
	"cert-manager.io/certificates":                                   "Certificate",
	"external-secrets.io/externalsecrets":                            "ExternalSecret",
	"source.toolkit.fluxcd.io/gitrepositories":                       "GitRepository",
	"image.toolkit.fluxcd.io/imagepolicies":                          "ImagePolicy",
	"notification.toolkit.fluxcd.io/alerts":                          "Alert",
	"notification.toolkit.fluxcd.io/providers":                       "Provider",
	"coordination.k8s.io/leases":                                     "Lease",
	"discovery.k8s.io/endpointslices":                                "EndpointSlice",
	"node.k8s.io/runtimeclasses":                                     "RuntimeClass",
	"flowcontrol.apiserver.k8s.io/flowschemas":                       "FlowSchema",
	"flowcontrol.apiserver.k8s.io/prioritylevelconfigurations":       "PriorityLevelConfiguration",
	"admissionregistration.k8s.io/validatingadmissionpolicies":       "ValidatingAdmissionPolicy",
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": "ValidatingAdmissionPolicyBinding",
	"apiregistration.k8s.io/apiservices":                             "APIService",
	"storage.k8s.io/csidrivers":                                      "CSIDriver",
	"certificates.k8s.io/certificatesigningrequests":                 "CertificateSigningRequest",
	"resource.k8s.io/resourceclaims":                                 "ResourceClaim",
	"networking.k8s.io/ipaddresses":                                  "IPAddress",
	"networking.k8s.io/servicecidrs":                                 "ServiceCIDR",
	"events.k8s.io/events":                                           "Event",
	"/pods":                                                          "Pod",
	"/nodes":                                                         "Node",
	"/events":                                                        "Event",
	"/endpoints":                                                     "Endpoints",
	"apps/controllerrevisions":                                       "ControllerRevision",
}

func resourceKind(group, resource string) string { return resourceKinds[group+"/"+resource] }

// kindGroups maps a kind to its API group, for sources that name only the kind (Flux's change set
// lines). Built from resourceKinds; a kind found in more than one group is left out.
func kindGroups() map[string]string {
	out := map[string]string{}
	dup := map[string]bool{}
	for gr, kind := range resourceKinds {
		g, _, _ := strings.Cut(gr, "/")
		if old, ok := out[kind]; ok && old != g {
			dup[kind] = true
		}
		out[kind] = g
	}
	for k := range dup {
		delete(out, k)
	}
	return out
}
