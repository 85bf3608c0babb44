// Package depgraph answers "what depends on this field?" for one revision of a repository, so that
// a policy can escalate or veto a change whose dependents cross a team or environment boundary.
//
// Build reads the repository's Terraform (.tf) files and Kubernetes manifests (.yaml, .yml, .json)
// into a Graph of edges "field A is read by field B"; Dependents follows them from a field,
// directly and transitively, and says why each dependent was reached. Addresses are core.Field in
// the form package fielddiff emits (see docs/addresses.md), so a changed field can be looked up as
// it is.
//
// # Terraform
//
// A directory holding .tf files is a module; Field.Module is that directory ("." at the root). The
// expressions are read with hcl/v2's native syntax, and every traversal an expression holds
// (Expression.Variables) is one dependency of the attribute holding it. The dependent is the
// attribute, addressed as fielddiff addresses it: /a for attribute a, /<block type>/<index>/... for
// nested blocks (a dynamic "tag" block is /dynamic.tag/<index>), object literals with static keys
// entered (data = {POOL_MAX = ...} is /data/POOL_MAX). What a traversal reads:
//
//	aws_x.y.attr[0].b    tf:DIR//aws_x.y#/attr/0/b   (an instance key right after the name, aws_x.y[0], is skipped)
//	aws_x.y              tf:DIR//aws_x.y             (no attribute: the whole resource, so every field of it)
//	data.t.n.attr        tf:DIR//data.t.n#/attr
//	var.x, var.x.a       tf:DIR//var.x               (the variable: its default, type, validation, or a caller's argument)
//	local.l, local.l.k   tf:DIR//local.l, tf:DIR//local.l#/k
//	module.m.out.k       tf:CHILD//output.out#/value/k for a module with a local source ("./..", "../.."),
//	                     tf:DIR//module.m (the whole call, so any argument of it) for any other source
//	each.*, count.*      tf:DIR//<block>#/for_each, tf:DIR//<block>#/count
//	<iterator>.*         the for_each of the enclosing dynamic block
//
// The address of a variable is tf:DIR//var.NAME with no pointer: the variable's value, whether it
// comes from its default or from a caller. The fields fielddiff reports inside it (var.NAME#/default,
// #/type, #/validation/0/...) therefore reach every reader of the variable; only a change of its
// #/description reaches none. A local is tf:DIR//local.NAME (entered where it is an object literal,
// local.NAME#/key), an output tf:DIR//output.NAME#/value, a module call's argument
// tf:DIR//module.NAME#/ARG. A module call with a local source passes each argument ARG to
// tf:CHILD//var.ARG, and a read of module.NAME.OUT reads tf:CHILD//output.OUT#/value. The graph is
// context-sensitive across such calls: what flows into a module from one call site flows out only
// to that call site's readers, so a shared module does not join the environments that call it
// (a change inside the module, where no call site is known, reaches every caller; so does a walk
// through modules nested more than 32 calls deep, or visiting more than 65,536 call contexts).
//
// Not read: variable blocks (defaults are literals), provider, terraform, moved, import and check
// blocks, a resource's provider argument, a module call's source, version and providers, and
// lifecycle.ignore_changes (which names attributes, not values). Attributes the provider computes
// (id, arn, endpoint) are not connected to the arguments that shape them: a reference to
// aws_x.y.id depends on tf:DIR//aws_x.y#/id only, which fielddiff never reports; reference the
// resource itself (depends_on, or the whole object) for "any change of it".
//
// A kubernetes_config_map(_v1) or kubernetes_secret(_v1) resource whose metadata name (and
// namespace, default "default") are literals is joined to the object it applies: its
// #/data/KEY is read by k8s:core/ConfigMap/NS/NAME#/data/KEY (a Secret's #/data/KEY), and its
// #/binary_data/KEY by the ConfigMap's #/binaryData/KEY (the Secret's #/data/KEY), so a Terraform
// change reaches the workloads reading that key.
//
// # Kubernetes
//
// Objects are identified as fielddiff identifies them (group, kind, namespace, name; the version is
// not identity), except that a missing namespace is "default", as kubectl applies it; Dependents
// also accepts a field without a namespace for the kinds read here. In the pod template of a
// Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob or Pod, for every container and init
// container:
//
//   - env[j].valueFrom.configMapKeyRef (secretKeyRef): the entry .../containers/i/env/j reads
//     k8s:core/ConfigMap/NS/NAME#/data/KEY (a Secret's #/data/KEY and #/stringData/KEY);
//   - envFrom[j].configMapRef (secretRef): .../containers/i/envFrom/j reads the ConfigMap's #/data
//     and #/binaryData (a Secret's #/data and #/stringData): every key, but not its labels;
//
// and for the pod's volumes[k].configMap, .secret and .projected.sources[l].configMap/.secret:
// .../volumes/k (or .../volumes/k/projected/sources/l) reads the whole data as above, or only the
// keys listed in items.
//
// A HorizontalPodAutoscaler drives its scaleTargetRef's replicas. That is represented as the HPA
// depending on its target: k8s:autoscaling/HorizontalPodAutoscaler/NS/H#/spec/scaleTargetRef reads
// the target's #/spec/replicas (a change of the replicas in Git fights the HPA, whose owner should
// know), and, for an HPA with a Resource metric, #/spec/metrics reads the target's containers'
// resources.requests, which utilization is measured against.
//
// # Traversal
//
// A field depends on another when their pointers overlap: one is the other or inside it. So a
// dependency on a whole object (tf:.//aws_x.y) is reached from every field of it, and a query for a
// whole object (k8s:core/ConfigMap/prod/s) reaches the dependents of every field of it. Dependents
// walks breadth first, so each dependent's Via explains the last step of a shortest chain; cycles
// end because each field is visited once per call context.
package depgraph
