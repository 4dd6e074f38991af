"""Gives every public package the same publishing fields (run after adding a package)."""
import json, pathlib, shutil

root = pathlib.Path(__file__).resolve().parent.parent
for manifest in sorted(root.glob('packages/*/package.json')):
    data = json.loads(manifest.read_text())
    if data.get('private'):
        continue
    folder = manifest.parent.name
    data['license'] = 'Apache-2.0'
    data['repository'] = {'type': 'git', 'url': 'git+https://github.com/adk-state/adk-state.git', 'directory': f'packages/{folder}'}
    data['homepage'] = f'https://github.com/adk-state/adk-state/tree/main/packages/{folder}#readme'
    data['bugs'] = {'url': 'https://github.com/adk-state/adk-state/issues'}
    data['sideEffects'] = False
    data['engines'] = {'node': '>=20'}
    data['publishConfig'] = {'access': 'public', 'provenance': False}
    extra = [f for f in data.get('files', []) if f not in ('dist', 'README.md', 'CHANGELOG.md', 'LICENSE')]
    data['files'] = ['dist', 'README.md', 'CHANGELOG.md', 'LICENSE', *extra]
    scripts = data.setdefault('scripts', {})
    scripts['check:package'] = 'publint --strict && attw --pack . --profile node16'
    keys = ['name', 'version', 'description', 'keywords', 'license', 'repository', 'homepage', 'bugs', 'type', 'sideEffects',
            'main', 'module', 'types', 'exports', 'files', 'engines', 'publishConfig', 'scripts', 'dependencies',
            'peerDependencies', 'peerDependenciesMeta', 'devDependencies']
    ordered = {k: data[k] for k in keys if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    manifest.write_text(json.dumps(ordered, indent=2) + '\n')
    shutil.copyfile(root / 'LICENSE', manifest.parent / 'LICENSE')
    changelog = manifest.parent / 'CHANGELOG.md'
    if not changelog.exists():
        changelog.write_text(f"# {data['name']}\n\n## {data['version']}\n\n- First release.\n")
    print('normalized', manifest.relative_to(root))
