package manifest

import "testing"

// TestReservedNames_RefusedByValidate: app names that would name the app's
// objects inside the system's (gordon-edge, gordon-reconcile,
// gordon-state-…), service names in the system's namespace and the
// system's networks as shared networks are refused, each at its key.
func TestReservedNames_RefusedByValidate(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"app edge", "name = \"edge\"\n[services.web]\nimage = \"web:1\"\n", "name",
			`app name "edge" is reserved: ` + reservedAppRule},
		{"app reconcile", "name = \"reconcile\"\n[services.web]\nimage = \"web:1\"\n", "name",
			`app name "reconcile" is reserved: ` + reservedAppRule},
		{"app edge-acme", "name = \"edge-acme\"\n[services.ca]\nimage = \"web:1\"\n", "name",
			`app name "edge-acme" is reserved: ` + reservedAppRule},
		{"app state-x", "name = \"state-x\"\n[services.web]\nimage = \"web:1\"\n", "name",
			`app name "state-x" is reserved: ` + reservedAppRule},
		{"service gordon-reconcile", "name = \"blog\"\n[services.gordon-reconcile]\nimage = \"web:1\"\n", "services.gordon-reconcile",
			`service name "gordon-reconcile" is reserved: ` + reservedServiceRule},
		{"network gordon-edge", "name = \"blog\"\nnetworks = [\"gordon-edge\"]\n[services.web]\nimage = \"web:1\"\n", "networks[0]",
			`network "gordon-edge" is reserved: ` + reservedNetworkRule},
		{"another app's network", "name = \"blog\"\nnetworks = [\"gordon-shop\"]\n[services.web]\nimage = \"web:1\"\n", "networks[0]",
			`network "gordon-shop" is reserved: ` + reservedNetworkRule},
	})
}

// TestReservedNames_NeighboursAccepted: names that only resemble a system
// word are an app's to use.
func TestReservedNames_NeighboursAccepted(t *testing.T) {
	for _, doc := range []string{
		"name = \"edgy\"\n[services.edge]\nimage = \"web:1\"\n",
		"name = \"myedge\"\n[services.reconcile]\nimage = \"web:1\"\n",
		"name = \"statement\"\nnetworks = [\"shared\"]\n[services.gordon]\nimage = \"web:1\"\n",
	} {
		if p := parseProblems(t, doc); p != nil {
			t.Errorf("%q refused: %v", doc, p)
		}
	}
}
