package core

// BuildSpec is a service's image build (manifest [services.X.build],
// compose build:). The CLI builds it on the engine that runs the app before
// the revision is stored (SPEC R12) and replaces it with the resulting image
// reference: a stored revision names an image and never carries a build,
// so build argument values never reach the journal.
type BuildSpec struct {
	// Context is the build context directory: absolute once loaded from a
	// file (a relative one is relative to the file that names it).
	Context string
	// Dockerfile is the Dockerfile's path relative to Context ("" means
	// "Dockerfile"), as compose's build.dockerfile.
	Dockerfile string
	// Args are the build arguments (ARG), name to value.
	Args map[string]string
	// Target is the build stage to stop at ("" builds the last stage).
	Target string
	// Labels are set on the built image.
	Labels map[string]string
}
