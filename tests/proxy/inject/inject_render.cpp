// Test helper for tests/helm: prints the pod `claimguard inject` would admit, given the very
// flags the chart passes to the injector. Usage: inject_render [inject flags...] --pod FILE
// [--namespace-opt-in] [--pod-namespace NS]. Exit 0 and the patched pod as JSON on stdout.
#include "proxy/inject/inject_cli.hpp"
#include "proxy/inject/patch.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
    using namespace claimguard::inject;
    CLI::App app{"inject_render"};
    inject_options options;
    add_inject_options(app, options);
    std::string pod_file;
    std::string pod_namespace = "default";
    bool namespace_opt_in = false;
    app.add_option("--pod", pod_file, "Pod JSON")->required();
    app.add_option("--pod-namespace", pod_namespace, "The pod's namespace");
    app.add_flag("--namespace-opt-in", namespace_opt_in, "As if the namespace were labelled");
    CLI11_PARSE(app, argc, argv);
    try {
        const injection_config config = make_injection_config(options);
        std::ifstream in(pod_file);
        std::stringstream text;
        text << in.rdbuf();
        const nlohmann::json pod = nlohmann::json::parse(text.str());
        const injection_plan plan = plan_injection(pod, pod_namespace, config,
                                                   namespace_opt_in ? opt_in::namespace_label : opt_in::pod_annotation);
        for (const auto& w : plan.warnings) std::cerr << "warning: " << w << "\n";
        std::cout << (plan.inject ? pod.patch(plan.patch) : pod).dump(2) << "\n";
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "inject_render: " << e.what() << "\n";
        return 2;
    }
}
