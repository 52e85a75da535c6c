package steps

import "github.com/gordon-deploy/docker-gordon/core"

// WorkloadRestartPolicy is the restart policy of every serving generation:
// a crash or an engine restart brings it back before any reconcile pass,
// while a container the runtime stopped (superseded, stopped or removed
// app) stays stopped, also across an engine restart.
const WorkloadRestartPolicy = "unless-stopped"

// EffectiveStopSignal is the signal that stops a generation of spec whose
// image is img (R25): the manifest's stop_signal, else the image's
// STOPSIGNAL, else SIGTERM. It is fixed on the container at creation, so a
// superseded container always gets its own generation's signal.
func EffectiveStopSignal(spec *core.ServiceSpec, img core.ImageRef) string {
	switch {
	case spec.StopSignal != "":
		return spec.StopSignal
	case img.StopSignal != "":
		return img.StopSignal
	}
	return "SIGTERM"
}

// applyContainerKeys copies the service's container keys into cs: the
// entrypoint and command (compose's meaning: command replaces only CMD),
// the effective stop signal, the healthcheck, the options with the default
// logging filled in, the restart policy and the manifest's labels (the
// caller adds the runtime's own labels after, so they win).
func ApplyContainerKeys(cs *core.ContainerSpec, spec *core.ServiceSpec, img core.ImageRef) {
	if spec.Entrypoint != nil {
		cs.Entrypoint = append([]string{}, spec.Entrypoint...)
	}
	if len(spec.Command) > 0 {
		cs.Cmd = append([]string(nil), spec.Command...)
	}
	cs.StopSignal = EffectiveStopSignal(spec, img)
	if spec.Healthcheck != nil {
		h := *spec.Healthcheck
		cs.Healthcheck = &h
	}
	cs.Options = spec.Container
	cs.Options.Labels = nil
	logging := spec.Container.EffectiveLogging()
	cs.Options.Logging = &logging
	cs.RestartPolicy = WorkloadRestartPolicy
	if cs.Labels == nil {
		cs.Labels = map[string]string{}
	}
	for k, v := range spec.Container.Labels {
		cs.Labels[k] = v
	}
}

// HasHealthcheck reports whether a generation of spec with image img runs
// a Docker healthcheck: the manifest's, else the image's unless the
// manifest disables it.
func HasHealthcheck(spec *core.ServiceSpec, img core.ImageRef) bool {
	if spec.Healthcheck != nil {
		return spec.Healthcheck.Enabled()
	}
	return img.HasHealthcheck
}
