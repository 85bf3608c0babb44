package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/gitops"
)

func TestGatesCommand(t *testing.T) {
	dir := t.TempDir()
	app := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n  namespace: argocd\nspec:\n  project: default\n"
	if code, out, _ := runIn(t, "", "gates", "--repo", dir); code != 0 || !strings.Contains(out, "no gates") {
		t.Fatalf("empty repo: %d %s", code, out)
	}
	f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	gated, _, err := gitops.AddGate("argocd/web.yaml", []byte(app), gitops.Target{Kind: "Application", Name: "web", Namespace: "argocd"},
		gitops.Gate{Field: f, Until: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC), Rule: "owner.replicas"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "argocd/web.yaml"), string(gated))
	writeFile(t, filepath.Join(dir, "broken.yaml"), "metadata:\n  annotations:\n    parley.dev/gates: '[not json'\n  name: x\nkind: Application\n")
	code, out, stderr := runIn(t, "", "gates", "--repo", dir)
	if code != 0 || !strings.Contains(out, "k8s:apps/Deployment/prod/web#/spec/replicas") || !strings.Contains(out, "Application argocd/web") ||
		!strings.Contains(out, "2026-11-23T09:00:00Z") || !strings.Contains(out, "owner.replicas") || !strings.Contains(stderr, "broken.yaml") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if code, out, _ := runIn(t, "", "gates", "--repo", dir, "--json"); code != 0 || !strings.Contains(out, `"file": "argocd/web.yaml"`) {
		t.Errorf("json: %d %s", code, out)
	}
	// A Terraform gate: lifecycle ignore_changes in the resource.
	tf := "resource \"aws_autoscaling_group\" \"consumer\" {\n  desired_capacity = 6\n}\n"
	capacity := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	gatedTF, _, err := gitops.AddTFGate("infra/kafka/main.tf", []byte(tf), gitops.Gate{Field: capacity, Rule: "rule.incident-first"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "infra/kafka/main.tf"), string(gatedTF))
	code, out, _ = runIn(t, "", "gates", "--repo", dir)
	if code != 0 || !strings.Contains(out, capacity.String()) || !strings.Contains(out, "resource aws_autoscaling_group.consumer") || !strings.Contains(out, "rule.incident-first") {
		t.Errorf("Terraform gate: exit %d\n%s", code, out)
	}
}
